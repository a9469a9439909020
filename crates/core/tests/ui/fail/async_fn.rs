#[tickscope::profile]
async fn fetch() -> u32 {
    1
}

fn main() {}
