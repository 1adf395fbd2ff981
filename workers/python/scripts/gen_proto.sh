#!/usr/bin/env bash
# Regenerate detsim_worker/_generated from proto/detsim/v1/worker.proto (needs the `dev` extra:
# grpcio-tools). The generated modules and a byte copy of the proto (its SHA-256 is the contract
# digest Worker.Hello negotiates) are checked in, so installing the package never needs protoc.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/detsim_worker/_generated"
python="${PYTHON:-python3}"
"$python" -m grpc_tools.protoc -I "$repo/proto" --python_out="$out" --grpc_python_out="$out" "$repo/proto/detsim/v1/worker.proto"
# protoc writes detsim/v1/worker_pb2*.py; flatten them into the package and make the import relative.
mv "$out/detsim/v1/worker_pb2.py" "$out/worker_pb2.py"
mv "$out/detsim/v1/worker_pb2_grpc.py" "$out/worker_pb2_grpc.py"
rm -rf "$out/detsim"
sed -i 's/^from detsim\.v1 import worker_pb2 as/from . import worker_pb2 as/' "$out/worker_pb2_grpc.py"
cp "$repo/proto/detsim/v1/worker.proto" "$out/worker.proto"
echo "regenerated $out"
