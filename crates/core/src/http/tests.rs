use super::*;

#[test]
fn seconds_default_to_30_and_stay_within_bounds() {
    assert_eq!(seconds(""), Ok(30));
    assert_eq!(seconds("debug=1&seconds=14"), Ok(14));
    assert_eq!(seconds("seconds=300"), Ok(300));
    for bad in [
        "seconds=0",
        "seconds=301",
        "seconds=1.5",
        "seconds=",
        "seconds=-1",
    ] {
        assert!(seconds(bad).is_err(), "{bad}");
    }
}
