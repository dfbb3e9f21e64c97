# Shared by the shell tests. Sourced; sets up paths, a scratch dir, an mpirun that works as root
# and on fewer cores than ranks, and helpers that fail the test with a message.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
DTRAIN=$top_builddir/dtrain
STDIFF=$top_builddir/tests/stdiff
MPIRUN=${MPIRUN:-$(command -v mpirun || true)}
PYTHON=${DT_PYTHON:-/usr/bin/python3}   # Debian's, where python3-numpy lives (a pyenv python may come first on PATH)
SKIP=77
T=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# quiet Open MPI's own notices; a rank that fails still makes mpirun fail
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_rmaps_base_oversubscribe=1

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "-- $*"; }

need_mpirun() { [ -n "$MPIRUN" ] || { echo "SKIP: mpirun not found (install openmpi-bin)"; exit $SKIP; }; }

# A sanitized build (configure --enable-sanitize) runs several times slower: its time limits are
# longer, and the accuracy runs on all of Fashion-MNIST are left out (skip_if_sanitized): their
# code paths run on small data in the other tests.
if [ "${DT_SANITIZED:-no}" = yes ]; then MPI_TIMEOUT=1200; else MPI_TIMEOUT=300; fi
skip_if_sanitized() { [ "${DT_SANITIZED:-no}" != yes ] || { echo "SKIP: sanitized build: $*"; exit $SKIP; }; }

# mpirun with a hard time limit: a hang is a failure, not a stuck CI job
mpi() { timeout $MPI_TIMEOUT "$MPIRUN" --oversubscribe --bind-to none "$@"; }

# value of KEY in the last JSON-lines record of TYPE in FILE
json_last() { grep "\"type\":\"$2\"" "$1" | tail -n 1 | sed -n "s/.*\"$3\":\([^,}]*\).*/\1/p"; }

# a small learnable IDX dataset in DIR (N train, M test, 10 classes, 28x28)
make_idx() { $PYTHON "$top_srcdir/tests/mkidx.py" "$@" || fail "could not generate IDX files"; }
