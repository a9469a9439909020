//! The URL holds a profile's view: zoom and search survive a reload, Back returns to the
//! view before, an edited hash is shown (issue 43, item 14).

use super::{browse, demo, dir, ok, shots, view};

#[test]
fn the_url_holds_the_flame_graphs_zoom_and_search_and_back_and_edits_work() {
    let d = dir("url");
    let prof = d.join("cpu.pb.gz");
    ok(&demo().arg("--cpuprofile").arg(&prof).output().unwrap());
    let v = view(&[prof.to_str().unwrap()]);
    let page = browse("url.mjs", &v.url, &shots("url"), &[]);
    assert_eq!(page["errors"], serde_json::json!([]), "{page}");
    let target = page["target"].as_u64().unwrap();
    assert!(target > 0, "{page}");
    for at in ["before", "reloaded"] {
        assert_eq!(page[at]["root"].as_u64(), Some(target), "{at}: {page}");
        assert_eq!(page[at]["search"], "demo", "{at}: {page}");
    }
    assert_eq!(page["top"]["pv"], "top", "{page}");
    // Back: the flame graph, zoomed and searched as before.
    assert_eq!(page["back"]["pv"], "flame", "{page}");
    assert_eq!(page["back"]["root"].as_u64(), Some(target), "{page}");
    assert_eq!(page["back"]["search"], "demo", "{page}");
    // An edited hash: what it names, the rest back to the defaults.
    assert_eq!(page["edited"]["pv"], "top", "{page}");
    assert_eq!(page["edited"]["search"], "", "{page}");
    let _ = std::fs::remove_dir_all(&d);
}
