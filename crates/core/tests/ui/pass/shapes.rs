//! Function shapes `#[profile]` must accept.

trait Shape {
    #[tickscope::profile]
    fn area(&self) -> f64 {
        0.0
    }
}

struct Square<T>(T);

impl<T: Copy + Into<f64>> Shape for Square<T> {
    #[tickscope::profile(name = "square area")]
    fn area(&self) -> f64 {
        let s: f64 = self.0.into();
        s * s
    }
}

#[tickscope::profile]
fn generic<T: std::fmt::Debug>(t: T) -> String {
    format!("{t:?}")
}

#[tickscope::profile]
fn returns_impl() -> impl Iterator<Item = u32> {
    0..3
}

#[tickscope::profile]
/// # Safety
/// None needed; it only checks `unsafe fn` is accepted.
unsafe fn unsafe_fn() -> u8 {
    1
}

#[tickscope::profile(group = "api")]
pub fn public_api() -> Result<(), std::io::Error> {
    std::fs::metadata(".")?;
    Ok(())
}

#[tickscope::profile]
async fn async_plain() -> u32 {
    1
}

#[tickscope::profile(name = "async fallible")]
async fn async_question_mark(path: &str) -> Result<u64, std::io::Error> {
    if path.is_empty() {
        return Ok(0);
    }
    Ok(std::fs::metadata(path)?.len())
}

#[tickscope::profile]
async fn async_impl_trait() -> impl std::fmt::Debug {
    7
}

#[tickscope::profile(group = "api")]
async fn async_unit(v: &mut Vec<u8>) {
    v.push(1);
}

struct Client;

impl Client {
    #[tickscope::profile]
    async fn get(&self, key: &str) -> Option<usize> {
        Some(key.len())
    }
}

/// A future that holds a scope across `.await` no longer is `Send`, but a profiled one is.
fn assert_send<T: Send>(_: &T) {}

fn main() {
    let _ = Square(2u8).area();
    let f = async_question_mark(".");
    assert_send(&f);
    drop(f);
    drop(async_plain());
    drop(async_impl_trait());
    let mut v = Vec::new();
    drop(async_unit(&mut v));
    drop(Client.get("k"));
    let _ = generic(1);
    let _ = returns_impl().count();
    // SAFETY: unsafe_fn has no preconditions.
    let _ = unsafe { unsafe_fn() };
    let _ = public_api();
    tickscope::scope!();
    tickscope::scope!("literal");
    tickscope::scope!(group = "api");
}
