#[tickscope::profile]
struct Config;

fn main() {}
