use tickscope::sampler::{Mode, Sampler, Source};
#[inline(never)]
fn spin(ms: u64) -> u64 {
    let t = std::time::Instant::now();
    let mut x = 0u64;
    while t.elapsed().as_millis() < ms as u128 {
        for i in 0..1000 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
    }
    x
}
#[inline(never)]
fn heavy() -> u64 {
    tickscope::scope!("heavy");
    spin(600)
}
#[inline(never)]
fn light() -> u64 {
    spin(200)
}
fn main() {
    let src = match std::env::args().nth(1).as_deref() {
        Some("perf") => Some(Source::PerfTaskClock),
        Some("timer") => Some(Source::ThreadCpuTimer),
        Some("itimer") => Some(Source::ProcessTimer),
        _ => None,
    };
    let hz = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1000);
    let mut b = Sampler::builder().frequency(hz).mode(Mode::Cpu);
    if let Some(s) = src {
        b = b.source(s);
    }
    let s = b.start().unwrap();
    println!("source {:?}", s.source());
    let h = std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| heavy().wrapping_add(light()))
        .unwrap();
    let x = heavy().wrapping_add(light());
    h.join().unwrap();
    let p = s.stop();
    println!("{}", p.top(10));
    for c in p.comments() {
        println!("# {c}");
    }
    p.write_pprof("/tmp/sx/q.pb.gz").unwrap();
    std::hint::black_box(x);
}
