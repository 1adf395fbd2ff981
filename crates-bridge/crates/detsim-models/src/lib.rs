// detsim's agent models in Rust, ported bit for bit from workers/models/ (TypeScript): the same
// decisions, RNG draws and captured state bytes (walker, lif). Not the worker runtime or its transport (those are
// crates-bridge/worker, detsim-worker-rs): these are the pieces that worker hosts.
pub mod lif;
pub mod params;
pub mod state_codec;
pub mod tick_clock;
pub mod walker;

pub use lif::Lif;
pub use state_codec::{StateValue, decode_state, encode_state};
pub use tick_clock::TickClock;
pub use walker::Walker;
