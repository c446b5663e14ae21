#!/bin/sh
# The image's entry point: the harness mounted at /opt/cuda-matrix/harness (what nox mounts: the
# cuda-matrix the project runs), else that of a cuda-matrix checkout mounted at /src, or how to
# use the image.
if [ -d /opt/cuda-matrix/harness ]; then
  # the mounted harness, never a folder of the project's that happens to be named harness
  export PYTHONPATH=/opt/cuda-matrix PYTHONSAFEPATH=1
  exec python -m harness "$@"
fi
if [ -d /src/harness ]; then
  exec python -m harness "$@"
fi
cat >&2 <<'USAGE'
This image compiles and runs the CUDA matrix of a project mounted at /src; it holds the
toolchain, not the project. From the project's folder, nox does all of this for you:

    nox -s test-sm90                 (docker when an engine answers, else the host)

or by hand, from a checkout of cuda-matrix, reports and compile cache written back to it:

    docker run --rm --gpus all --user "$(id -u):$(id -g)" \
        -v "$PWD:/src:ro" -v "$PWD/reports:/out/reports" -v "$PWD/.cache/compile:/out/cache" \
        IMAGE test sm_90a --reports /out/reports --cache /out/cache

Commands: test <target>, sanitize <target>, compile [targets], report [files]; --help for more.
USAGE
exit 2
