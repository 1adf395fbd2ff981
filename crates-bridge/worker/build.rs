// Compiles ../../proto/detsim/v1/worker.proto with protox (no system protoc) into the tonic server.
// Not a place for logic: the contract digest is computed from the same file at compile time in main.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../../proto/detsim/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
