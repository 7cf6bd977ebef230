// Train a classifier on the shipped digits on any backend (TANDEM_BACKEND, default auto).
#include <cstdio>

#include <tandem/mlp.hpp>
#include <tandem/tandem.hpp>

int main(int argc, char** argv) try {
  auto d = tandem::data::read_csv(argc > 1 ? argv[1] : "data/digits.csv.gz", {.label_column = -1});
  auto [train, test] = tandem::data::train_test_split(d, 0.2, /*seed*/ 42);
  const auto standardizer = tandem::data::Standardizer::fit(train);
  standardizer.apply(train);
  standardizer.apply(test);

  tandem::ml::Mlp model(tandem::default_backend(), tandem::ml::layers_from_widths({64, 128, 10}));
  model.standardizer = standardizer;  // saved with the model
  tandem::ml::train(model, train, &test, {.epochs = 30, .batch_size = 32});
  std::printf("held-out accuracy %.1f%% on %s\n", 100 * tandem::ml::evaluate(model, test).accuracy,
              model.backend().name().c_str());
  model.save("digits.model");  // versioned, CRC-32; Mlp::load raises DataError on a bad file
} catch (const tandem::Error& e) {
  std::fprintf(stderr, "train_digits: %s\n", e.what());
  return 1;
}
