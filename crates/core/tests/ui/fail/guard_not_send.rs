fn assert_send<T: Send>() {}

fn main() {
    // A scope belongs to the thread that opened it.
    assert_send::<tickscope::Scope>();
}
