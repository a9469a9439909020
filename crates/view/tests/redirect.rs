//! The file that opens the browser: the opener gets its path, not the token; only the user
//! can read it (0600 in a new 0700 directory); it holds the URL; it goes once the page is
//! served with the token, or when dropped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use tickscope_view::browser::Redirect;
use tickscope_view::{start, Config};

use crate::server::{capture_file, dir, get};

#[test]
fn the_redirect_is_the_users_alone_and_holds_the_url() {
    let d = dir("redirect");
    let url = "http://127.0.0.1:1234/?token=0123abcd&x=<y>";
    let r = Redirect::create_in(&d, url).unwrap();
    let (file, folder) = (r.file().to_owned(), r.dir().to_owned());
    assert_eq!(folder.parent(), Some(d.as_path()));
    assert!(!file.display().to_string().contains("0123abcd"));
    let (fm, dm) = (
        std::fs::symlink_metadata(&file).unwrap(),
        std::fs::symlink_metadata(&folder).unwrap(),
    );
    assert!(fm.is_file() && dm.is_dir());
    assert_eq!(fm.permissions().mode() & 0o777, 0o600);
    assert_eq!(dm.permissions().mode() & 0o777, 0o700);
    let own = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!((fm.uid(), dm.uid()), (own, own));
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(
        html.contains("http://127.0.0.1:1234/?token=0123abcd&amp;x=&lt;y&gt;"),
        "{html}"
    );
    assert!(
        html.contains("location.replace(\"http://127.0.0.1:1234/?token=0123abcd&x=\\u003cy>\")"),
        "{html}"
    );
    // Another redirect gets another directory.
    let other = Redirect::create_in(&d, url).unwrap();
    assert_ne!(other.dir(), folder);
    drop(r);
    assert!(!file.exists() && !folder.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_redirect_goes_once_the_page_is_served_with_the_token() {
    let d = dir("redirect-served");
    let s = start(&Config {
        inputs: vec![capture_file(&d)],
        ..Config::default()
    })
    .unwrap();
    let r = std::sync::Arc::new(Redirect::create_in(&d, &s.url).unwrap());
    s.viewer.remove_on_page(r.clone());
    let rest = s.url.strip_prefix("http://").unwrap().to_owned();
    std::thread::spawn(move || s.serve());
    let (addr, token) = rest.split_once("/?token=").unwrap();
    // Not by a request without the token, nor by an API request.
    assert_eq!(get(addr, "/").0, 403);
    assert_eq!(get(addr, &format!("/api/info?token={token}")).0, 200);
    assert!(r.file().exists());
    assert_eq!(get(addr, &format!("/?token={token}")).0, 200);
    let end = Instant::now() + Duration::from_secs(60);
    while r.file().exists() || r.dir().exists() {
        assert!(
            Instant::now() < end,
            "{} is still there",
            r.file().display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&d);
}
