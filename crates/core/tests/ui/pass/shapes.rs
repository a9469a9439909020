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

fn main() {
    let _ = Square(2u8).area();
    let _ = generic(1);
    let _ = returns_impl().count();
    // SAFETY: unsafe_fn has no preconditions.
    let _ = unsafe { unsafe_fn() };
    let _ = public_api();
    tickscope::scope!();
    tickscope::scope!("literal");
    tickscope::scope!(group = "api");
}
