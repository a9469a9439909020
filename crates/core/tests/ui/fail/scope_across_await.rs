// A scope belongs to the thread that opened it: one held across `.await` makes the future
// not `Send`, so a multi-thread executor refuses it. (Profile the future instead:
// `#[profile] async fn` or `.profiled("name")`.)
async fn tick() {}

async fn held() {
    tickscope::scope!("held");
    tick().await;
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(held());
}
