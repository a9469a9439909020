use super::*;
use std::io::{Read, Write};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickscope-output-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_new_or_regular_output_is_replaced_only_when_complete() {
    let d = scratch("replace");
    let target = d.join("out.json");
    let mut o = OutputFile::create(&target).unwrap();
    o.file().write_all(b"first").unwrap();
    assert!(!target.exists(), "written beside, not in place");
    o.commit().unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "first");
    // Dropped uncommitted: the old file stays and no temporary is left.
    let mut o = OutputFile::create(&target).unwrap();
    o.file().write_all(b"half").unwrap();
    let tmp = o.tmp_path().unwrap().to_owned();
    assert!(tmp
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(".out.json.tmp-"));
    drop(o);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "first");
    assert_eq!(names(&d), ["out.json"]);
    // This user's own file's mode is kept.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut o = OutputFile::create(&target).unwrap();
    o.file().write_all(b"second").unwrap();
    o.commit().unwrap();
    let m = std::fs::metadata(&target).unwrap();
    assert_eq!(m.mode() & 0o777, 0o640);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "second");
    // Two temporary names are never alike (unpredictable, not a pid and a counter).
    let a = OutputFile::create(&target).unwrap();
    let b = OutputFile::create(&target).unwrap();
    assert_ne!(a.tmp_path(), b.tmp_path());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_link_and_file_of_this_users_own_are_written_through() {
    let d = scratch("ownlink");
    std::fs::write(d.join("real"), "old").unwrap();
    std::os::unix::fs::symlink("real", d.join("latest")).unwrap();
    let mut o = OutputFile::create(&d.join("latest")).unwrap();
    o.file().write_all(b"new").unwrap();
    o.commit().unwrap();
    assert!(std::fs::symlink_metadata(d.join("latest"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(d.join("real")).unwrap(), "new");
    assert_eq!(names(&d), ["latest", "real"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// A link another user planted (root runs this part: the link is given to `nobody`) is refused
/// even where the file it leads to is this user's own.
#[test]
fn a_symlink_at_the_name_is_refused_and_its_target_untouched() {
    let d = scratch("link");
    std::fs::write(d.join("victim"), "precious").unwrap();
    std::os::unix::fs::symlink(d.join("victim"), d.join("out.json")).unwrap();
    if crate::env::euid() == 0 {
        let c = std::ffi::CString::new(d.join("out.json").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    } else {
        // This user's own link to a file of root's: the file is not this user's.
        std::fs::remove_file(d.join("out.json")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.join("out.json")).unwrap();
    }
    for options in [
        Options::default(),
        Options {
            in_place_if_new: true,
            refuse_if_changed: true,
        },
    ] {
        let e = OutputFile::create_with(&d.join("out.json"), options).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
    // A dangling one too: following it would create a file where the link says.
    std::os::unix::fs::symlink(d.join("elsewhere"), d.join("dangling")).unwrap();
    assert!(OutputFile::create(&d.join("dangling")).is_err());
    assert!(!d.join("elsewhere").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("victim")).unwrap(),
        "precious"
    );
    assert_eq!(names(&d), ["dangling", "out.json", "victim"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_fifo_or_device_is_written_into_and_never_replaced() {
    let d = scratch("fifo");
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(fifo)
                .unwrap()
                .read_to_string(&mut s)
                .unwrap();
            s
        })
    };
    let mut o = OutputFile::create(&fifo).unwrap();
    assert!(o.tmp_path().is_none());
    o.file().write_all(b"through the fifo").unwrap();
    o.commit().unwrap();
    assert_eq!(reader.join().unwrap(), "through the fifo");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names(&d), ["fifo"]);
    // /dev/null stays a character device.
    let mut o = OutputFile::create(Path::new("/dev/null")).unwrap();
    o.file().write_all(b"x").unwrap();
    o.commit().unwrap();
    let m = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(m.file_type().is_char_device());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn in_place_if_new_writes_a_new_name_itself_and_replaces_an_old_one_when_complete() {
    let d = scratch("inplace");
    let target = d.join("cap.tscap");
    let options = Options {
        in_place_if_new: true,
        ..Options::default()
    };
    let mut o = OutputFile::create_with(&target, options).unwrap();
    o.file().write_all(b"partial").unwrap();
    // Readable while written: a program killed now leaves it.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "partial");
    o.commit().unwrap();
    let mut o = OutputFile::create_with(&target, options).unwrap();
    assert!(o.tmp_path().is_some());
    o.file().write_all(b"cut").unwrap();
    drop(o);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "partial");
    assert_eq!(names(&d), ["cap.tscap"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn refuse_if_changed_keeps_what_another_process_wrote_meanwhile() {
    let d = scratch("changed");
    let target = d.join("same.pb.gz");
    let options = Options {
        refuse_if_changed: true,
        ..Options::default()
    };
    // Absent at the open, created by another run before the commit.
    let mut a = OutputFile::create_with(&target, options).unwrap();
    a.file().write_all(b"a").unwrap();
    let mut b = OutputFile::create_with(&target, options).unwrap();
    b.file().write_all(b"b").unwrap();
    assert!(!b.changed());
    b.commit().unwrap();
    assert!(a.changed());
    let e = a.commit().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "b");
    // Present at the open and replaced since: the same; kept apart under a new name.
    let mut c = OutputFile::create_with(&target, options).unwrap();
    c.file().write_all(b"c").unwrap();
    let mut other = OutputFile::create(&target).unwrap();
    other.file().write_all(b"other, longer").unwrap();
    other.commit().unwrap();
    assert!(c.changed());
    c.commit_as_new(&d.join("same.pb.gz.2")).unwrap();
    assert_eq!(
        std::fs::read_to_string(d.join("same.pb.gz.2")).unwrap(),
        "c"
    );
    assert_eq!(names(&d), ["same.pb.gz", "same.pb.gz.2"]);
    // A new name that exists is never replaced.
    let mut e = OutputFile::create(&target).unwrap();
    e.file().write_all(b"e").unwrap();
    let err = e.commit_as_new(&d.join("same.pb.gz.2")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(names(&d), ["same.pb.gz", "same.pb.gz.2"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn private_dirs_are_new_unpredictable_and_this_users_alone() {
    let d = scratch("private");
    let a = private_dir(&d, ".run-").unwrap();
    let b = private_dir(&d, ".run-").unwrap();
    assert_ne!(a, b);
    let m = std::fs::symlink_metadata(&a).unwrap();
    assert!(m.is_dir());
    assert_eq!(m.mode() & 0o777, 0o700);
    let e = OutputFile::create(&d.join("no/such/out")).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
