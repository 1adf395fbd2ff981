# Generated gRPC/protobuf code for proto/detsim/v1/worker.proto (scripts/gen_proto.sh) and a byte
# copy of that proto, whose SHA-256 is the contract digest. Do not edit by hand.
