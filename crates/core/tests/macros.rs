//! `#[profile]` and `scope!` through the public API, and their compile errors (trybuild).

use tickscope::SummaryFormat;

#[tickscope::profile]
fn plain() {}

struct Parser;

impl Parser {
    #[tickscope::profile]
    fn method(&self) -> u32 {
        1
    }
}

#[tickscope::profile(name = "macros custom name")]
fn named() {}

#[tickscope::profile(group = "macros group")]
fn group_outer() {
    group_inner();
}

#[tickscope::profile(group = "macros group")]
fn group_inner() {}

#[tickscope::profile]
fn recurse(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        recurse(n - 1) + 1
    }
}

#[tickscope::profile]
fn early_return(fail: bool) -> Result<u32, String> {
    if fail {
        return Err("early".into());
    }
    let v: u32 = "41".parse().map_err(|_| "parse".to_string())?;
    Ok(v + 1)
}

/// Looks up `"calls":N` of the scope named `name` in a JSON summary.
fn calls(json: &str, name: &str) -> Option<u64> {
    let key = format!("{{\"name\":{name:?},");
    let obj = &json[json.find(&key)?..];
    let obj = &obj[..obj.find('}')?];
    let calls = &obj[obj.find("\"calls\":")? + 8..];
    calls[..calls.find(',')?].parse().ok()
}

#[test]
fn profile_attribute_measures_functions_methods_groups_and_recursion() {
    let _scopes = crate::scopes_turn();
    tickscope::Config::new()
        .summary(SummaryFormat::Off)
        .install();
    std::thread::spawn(|| {
        for _ in 0..3 {
            plain();
            Parser.method();
            named();
            group_outer();
        }
        recurse(9);
        assert_eq!(early_return(false), Ok(42));
        assert!(early_return(true).is_err());
        let closure = || {
            tickscope::scope!();
        };
        closure();
    })
    .join()
    .unwrap();
    let json = tickscope::report_string(SummaryFormat::Json);
    assert_eq!(calls(&json, "plain"), Some(3), "{json}");
    assert_eq!(calls(&json, "Parser::method"), Some(3), "{json}");
    assert_eq!(calls(&json, "macros custom name"), Some(3), "{json}");
    assert_eq!(calls(&json, "macros group"), Some(6), "{json}");
    assert!(
        json.contains("\"name\":\"macros group\",\"kind\":\"group\""),
        "{json}"
    );
    assert_eq!(calls(&json, "recurse"), Some(10), "{json}");
    assert!(
        json.contains(
            "\"name\":\"recurse\",\"kind\":\"scope\",\"file\":\"crates/core/tests/macros.rs\""
        ),
        "{json}"
    );
    assert_eq!(
        calls(&json, "early_return"),
        Some(2),
        "every return path closes the scope"
    );
    assert_eq!(
        calls(
            &json,
            "profile_attribute_measures_functions_methods_groups_and_recursion"
        ),
        Some(1),
        "{json}"
    );
}

#[test]
fn scope_guard_is_inert_when_disabled_at_run_time() {
    let _scopes = crate::scopes_turn();
    tickscope::Config::new()
        .summary(SummaryFormat::Off)
        .install();
    let count = || {
        calls(
            &tickscope::report_string(SummaryFormat::Json),
            "macros runtime switch",
        )
    };
    std::thread::spawn(move || {
        tickscope::set_enabled(false);
        {
            tickscope::scope!("macros runtime switch");
        }
        tickscope::set_enabled(true);
        assert_eq!(count(), None, "nothing recorded while disabled");
        {
            tickscope::scope!("macros runtime switch");
        }
        assert_eq!(count(), Some(1));
    })
    .join()
    .unwrap();
}

/// Looks up the number at `"key":N` in the object of the scope named `name`.
fn field(json: &str, name: &str, key: &str) -> Option<u64> {
    let obj = &json[json.find(&format!("{{\"name\":{name:?},"))?..];
    let obj = &obj[..obj.find('}')?];
    let at = &obj[obj.find(&format!("\"{key}\":"))? + key.len() + 3..];
    at[..at.find(|c: char| !c.is_ascii_digit())?].parse().ok()
}

/// The exit records a thread's latest duration into the histogram at the thread's next exit
/// (off the clock reading's path): until then it waits in its slot, and every reader counts
/// it. A thread that made one call and lives on, and one that ended, both have percentiles.
#[test]
fn a_threads_latest_call_is_in_the_percentiles_while_it_lives_and_after() {
    let _scopes = crate::scopes_turn();
    tickscope::Config::new()
        .summary(SummaryFormat::Off)
        .install();
    let (entered, stay) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (entered_tx, stay_rx) = (entered.0, stay.1);
    let t = std::thread::spawn(move || {
        {
            tickscope::scope!("macros latest call");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        entered_tx.send(()).unwrap();
        let _ = stay_rx.recv(); // alive until the test has read the summary
    });
    entered.1.recv().unwrap();
    let json = tickscope::report_string(SummaryFormat::Json);
    let name = "macros latest call";
    assert_eq!(calls(&json, name), Some(1), "{json}");
    let (min, p50, max) = (
        field(&json, name, "min_ns"),
        field(&json, name, "p50_ns"),
        field(&json, name, "max_ns"),
    );
    assert!(min.is_some() && p50 == min && p50 == max, "{json}");
    assert!(p50 >= Some(2_000_000), "{json}");
    stay.0.send(()).unwrap();
    t.join().unwrap();
    let json = tickscope::report_string(SummaryFormat::Json);
    assert_eq!(calls(&json, name), Some(1), "{json}");
    assert_eq!(field(&json, name, "p50_ns"), p50, "{json}");
}

/// Compile errors: `#[profile]` on `const fn`, bad arguments, sending a guard to another
/// thread or holding one across `.await` in a `Send` future; and the shapes accepted,
/// `async fn` among them. Re-bless the expected messages with `TRYBUILD=overwrite`.
#[test]
fn ui() {
    let _heavy = crate::CPU_HEAVY.read().unwrap_or_else(|p| p.into_inner());
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
