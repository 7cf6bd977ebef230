# tandem on a fresh Debian 12, set up with the README's two commands (tests/cmake/dockerfile.cmake
# checks that they are the README's):
#   docker build -t tandem .                 installs what is needed, builds, runs the main job
#   docker run --rm tandem                   runs the whole test suite (ci/test.sh)
# Both reach the Debian archive and PyPI. No GPU is needed: the CUDA and HIP backends report
# Skipped without one, and the simulator runs every GPU kernel.
FROM debian:12
# What the scripts themselves need before they can install the rest: TLS roots for PyPI.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /tandem
COPY . .
RUN bash ci/run-main.sh
CMD ["bash", "ci/test.sh"]
