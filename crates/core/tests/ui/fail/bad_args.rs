#[tickscope::profile(label = "x")]
fn unknown_argument() {}

#[tickscope::profile(name = 5)]
fn not_a_string() {}

#[tickscope::profile(name = "a", group = "b")]
fn both() {}

#[tickscope::profile(name = "a", name = "b")]
fn twice() {}

#[tickscope::profile(fast)]
fn bare_word() {}

fn main() {}
