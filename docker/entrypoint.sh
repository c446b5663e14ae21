#!/bin/sh
# The image's entry point: the harness of the project mounted at /src, or how to use the image.
if [ ! -d /src/harness ]; then
  cat >&2 <<'USAGE'
This image compiles and runs the CUDA matrix of a project mounted at /src; it holds the
toolchain, not the project. From the project's folder, nox does all of this for you:

    nox -s test-sm90                 (docker when an engine answers, else the host)

or by hand, reports and compile cache written back to the project:

    docker run --rm --gpus all --user "$(id -u):$(id -g)" \
        -v "$PWD:/src:ro" -v "$PWD/reports:/out/reports" -v "$PWD/.cache/compile:/out/cache" \
        IMAGE test sm_90a --reports /out/reports --cache /out/cache

Commands: test <target>, sanitize <target>, compile [targets], report [files]; --help for more.
USAGE
  exit 2
fi
exec python -m harness "$@"
