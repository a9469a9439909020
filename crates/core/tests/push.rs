//! Push (issue 42): a loopback receiver that answers as Pyroscope's Push does (or fails as
//! told), decodes every request, and adds the profiles up.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use tickscope::push::{Builder, Retry};

#[path = "push_support.rs"]
mod support;
use support::{decode, receiver, sums, sums4};

#[inline(never)]
fn push_test_burn(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
    }
    x
}

fn burn(d: Duration) {
    let until = Instant::now() + d;
    let t = std::thread::spawn(move || push_test_burn(until));
    std::hint::black_box(push_test_burn(until));
    std::hint::black_box(t.join().unwrap());
}

#[test]
fn pushed_windows_add_up_to_the_whole_profile_in_pyroscopes_shape() {
    let _turn = crate::sampler::LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    // The first request fails (a 503): it is tried again, the same profile.
    let (url, got) = receiver(vec![503]);
    let pusher = Builder::new(&url)
        .service_name("push-test")
        .label("env", "test")
        .tenant("tenant-1")
        .interval(Duration::from_secs(1))
        .retry(Retry {
            first: Duration::from_millis(50),
            max: Duration::from_millis(200),
            tries: 5,
        })
        .start()
        .unwrap();
    // 32 MiB allocated in 1 KiB blocks while it pushes (this binary's allocator is
    // `tickscope::alloc::Profiled`): the heap's windows hold them.
    let kept: Vec<Vec<u8>> = (0..32 * 1024).map(|i| vec![i as u8; 1024]).collect();
    burn(Duration::from_millis(3500));
    let report = pusher.stop();
    drop(std::hint::black_box(kept));
    let got = got.lock().unwrap();
    assert_eq!(report.dropped, 0, "{report:?}");
    assert!(report.retried >= 1, "{report:?}");
    assert_eq!(report.sent, report.windows);
    assert!(report.windows >= 3, "{report:?}");
    let mut ids = std::collections::HashSet::new();
    let mut total = [0i64; 2];
    let mut first_failed = None;
    let mut heap = Vec::new();
    for g in got.iter() {
        assert_eq!(g.path, "/push.v1.PusherService/Push");
        assert_eq!(g.headers["content-type"], "application/proto");
        assert_eq!(g.headers["content-encoding"], "gzip");
        assert_eq!(g.headers["x-scope-orgid"], "tenant-1");
        let (labels, id, pprof) = decode(&g.body);
        if labels.contains(&("__name__".to_string(), "memory".to_string())) {
            if g.status == 200 {
                heap.push(pprof);
            }
            continue;
        }
        for want in [
            ("__name__", "process_cpu"),
            ("service_name", "push-test"),
            ("env", "test"),
        ] {
            assert!(
                labels.iter().any(|(k, v)| k == want.0 && v == want.1),
                "{want:?} not in {labels:?}"
            );
        }
        if g.status != 200 {
            first_failed = Some(id);
            continue;
        }
        // Nothing taken twice.
        assert!(ids.insert(id), "a profile taken twice");
        let s = sums(&pprof);
        total[0] += s[0];
        total[1] += s[1];
    }
    // The failed one was sent again and taken.
    assert!(ids.contains(&first_failed.expect("the 503")));
    assert_eq!(ids.len() as u64 + heap.len() as u64, report.sent);
    // The heap's windows: their allocations add up to at least most of the 32 MiB (a
    // sampled estimate: 64 samples at 512 KiB, a relative error near 1/8; other tests of
    // this binary allocate beside it, never less), and no more than the heap profile holds
    // since the process began.
    assert!(!heap.is_empty(), "no heap profile pushed");
    let pushed: i64 = heap.iter().map(|p| sums4(p)[1]).sum();
    let whole = tickscope::alloc::profile().totals().1;
    assert!(
        pushed >= 16 << 20 && pushed <= whole,
        "alloc_space pushed {pushed}, whole {whole}"
    );
    // The windows add up to the whole profile, exactly.
    let whole = sums(&report.profile.to_pprof_bytes());
    assert_eq!(total, whole);
    assert!(whole[1] > 1_000_000_000, "{whole:?}: the burn's CPU time");
    // Each window is a profile go tool pprof reads, with the burn in it, named: later
    // snapshots name their new addresses with the symboliser the first one built.
    for (i, g) in got.iter().filter(|g| g.status == 200).enumerate() {
        let (labels, _, pprof) = decode(&g.body);
        if labels.contains(&("__name__".to_string(), "memory".to_string())) {
            continue;
        }
        let file =
            std::env::temp_dir().join(format!("tickscope-push-{}-{i}.pb", std::process::id()));
        std::fs::write(&file, &pprof).unwrap();
        let out = std::process::Command::new("go")
            .args(["tool", "pprof", "-top"])
            .arg(&file)
            .output()
            .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
        let _ = std::fs::remove_file(&file);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("push_test_burn"), "window {i}: {text}");
    }
}

#[test]
fn refused_and_unreachable_pushes_are_dropped_and_counted() {
    let _turn = crate::sampler::LOCK
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    // Refused (400): dropped at once, never tried again.
    let (url, got) = receiver(vec![400; 100]);
    let pusher = Builder::new(&url)
        .interval(Duration::from_secs(1))
        .start()
        .unwrap();
    burn(Duration::from_millis(2200));
    let r = pusher.stop();
    assert_eq!((r.sent, r.retried), (0, 0), "{r:?}");
    assert!(r.windows >= 2, "{r:?}");
    assert_eq!(r.dropped, r.windows);
    assert_eq!(got.lock().unwrap().len() as u64, r.windows);
    // Nothing listening: each window tried twice, then dropped.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let pusher = Builder::new(&format!("http://{closed}"))
        .interval(Duration::from_secs(1))
        .retry(Retry {
            first: Duration::from_millis(10),
            max: Duration::from_millis(10),
            tries: 2,
        })
        .start()
        .unwrap();
    burn(Duration::from_millis(2200));
    let r = pusher.stop();
    assert_eq!(r.sent, 0, "{r:?}");
    assert!(r.windows >= 2, "{r:?}");
    assert_eq!(r.dropped, r.windows, "{r:?}");
    assert_eq!(r.retried, r.windows, "{r:?}");
    // The program was told.
    let summary = tickscope::report_string(tickscope::SummaryFormat::Text);
    assert!(summary.contains("pushed to Pyroscope dropped"), "{summary}");
}
