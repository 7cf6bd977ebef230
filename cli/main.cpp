// tandem: the command-line front end (cli/app.cpp builds it).
#include "cli.hpp"

int main(int argc, char** argv) { return tandem::cli::run(argc, argv); }
