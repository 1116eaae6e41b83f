use super::*;

fn milli(q: &str) -> Result<i64, QuantityError> {
    Quantity::parse(q)?.milli_value()
}

fn value(q: &str) -> Result<i64, QuantityError> {
    Quantity::parse(q)?.value()
}

#[test]
fn accepted_forms_in_millis_and_units() {
    // (text, milli_value, value): the values apimachinery's MilliValue/Value give.
    let table: &[(&str, i64, i64)] = &[
        ("0", 0, 0),
        ("500m", 500, 1),
        ("0.5", 500, 1),
        ("2", 2000, 2),
        ("+2", 2000, 2),
        ("-2", -2000, -2),
        ("0.0001", 1, 1),
        ("1n", 1, 1),
        ("1u", 1, 1),
        ("1000u", 1, 1),
        ("1001u", 2, 1),
        ("1k", 1_000_000, 1000),
        ("1M", 1_000_000_000, 1_000_000),
        ("1G", 1_000_000_000_000, 1_000_000_000),
        ("1T", 1_000_000_000_000_000, 1_000_000_000_000),
        ("1P", 1_000_000_000_000_000_000, 1_000_000_000_000_000),
        ("1E", 0, 1_000_000_000_000_000_000), // milli overflows: checked below
        ("1Ki", 1_024_000, 1024),
        ("128Mi", 134_217_728_000, 134_217_728),
        ("1.5Ki", 1_536_000, 1536),
        ("0.1Ki", 102_400, 103),
        ("1Gi", 1_073_741_824_000, 1 << 30),
        ("1Ti", 1_099_511_627_776_000, 1 << 40),
        ("1Pi", 1_125_899_906_842_624_000, 1 << 50),
        ("1Ei", 0, 1 << 60),
        ("1e3", 1_000_000, 1000),
        ("1E3", 1_000_000, 1000),
        ("1e+3", 1_000_000, 1000),
        ("1e-3", 1, 1),
        ("15e-1", 1500, 2),
        ("1.5e1", 15_000, 15),
        (".5", 500, 1),
        ("5.", 5000, 5),
        ("007", 7000, 7),
        ("0.000", 0, 0),
        ("-0", 0, 0),
        ("1e-100", 1, 1),
        ("-1e-100", -1, -1),
        ("100m", 100, 1),
        ("1.G", 1_000_000_000_000, 1_000_000_000),
        // The API server's scanner accepts these as zero (nothing left of the number).
        ("-", 0, 0),
        ("+", 0, 0),
        (".", 0, 0),
        (" 250m ", 250, 1),
    ];
    for &(text, m, v) in table {
        let q = Quantity::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        if !matches!(text, "1E" | "1Ei") {
            assert_eq!(q.milli_value(), Ok(m), "{text:?} milli");
        }
        assert_eq!(q.value(), Ok(v), "{text:?} value");
    }
}

#[test]
fn refused_forms_with_the_api_servers_reason() {
    let table: &[(&str, QuantityError)] = &[
        ("", QuantityError::Format),
        ("   ", QuantityError::Format),
        ("512MB", QuantityError::Format),
        ("1 core", QuantityError::Format),
        ("lots", QuantityError::Format),
        ("12Qi", QuantityError::Format),
        ("1.5.5", QuantityError::Format),
        ("1e3.5", QuantityError::Format),
        ("0x10", QuantityError::Format),
        ("1,5", QuantityError::Format),
        ("1KiB", QuantityError::Format),
        (
            "--1",
            QuantityError::Suffix {
                suffix: "-1".into(),
            },
        ),
        ("1K", QuantityError::Suffix { suffix: "K".into() }),
        (
            "1ki",
            QuantityError::Suffix {
                suffix: "ki".into(),
            },
        ),
        (
            "1mi",
            QuantityError::Suffix {
                suffix: "mi".into(),
            },
        ),
        (
            "1Mm",
            QuantityError::Suffix {
                suffix: "Mm".into(),
            },
        ),
        ("1e", QuantityError::Suffix { suffix: "e".into() }),
        (
            "1e+",
            QuantityError::Suffix {
                suffix: "e+".into(),
            },
        ),
        (
            "1ee3",
            QuantityError::Suffix {
                suffix: "ee3".into(),
            },
        ),
        (
            "1e99999999999999999999",
            QuantityError::Suffix {
                suffix: "e99999999999999999999".into(),
            },
        ),
        (
            "1e4294967296",
            QuantityError::Exponent {
                exponent: "4294967296".into(),
            },
        ),
        (
            "1e-2147483648",
            QuantityError::Exponent {
                exponent: "-2147483648".into(),
            },
        ),
    ];
    for (text, want) in table {
        assert_eq!(Quantity::parse(text).as_ref(), Err(want), "{text:?}");
    }
}

#[test]
fn values_that_do_not_fit_are_errors_not_caps_or_panics() {
    let too_large = |unit| {
        Err(QuantityError::TooLarge {
            max: i64::MAX,
            unit,
        })
    };
    assert_eq!(value("1e2147483647"), too_large("units"));
    assert_eq!(value("9223372036854775808"), too_large("units"));
    assert_eq!(value("8Ei"), too_large("units"), "the API server caps this");
    assert_eq!(milli("1E"), too_large("thousandths"));
    assert_eq!(milli("9223372036854775807"), too_large("thousandths"));
    assert_eq!(value("9223372036854775807"), Ok(i64::MAX));
    assert_eq!(value("-9223372036854775807"), Ok(-i64::MAX));
    assert_eq!(value("7Ei"), Ok(7 << 60));
    assert_eq!(
        value("99999999999999999999999999999999999999e-30"),
        Ok(100_000_000)
    );
    // Zero with any exponent is zero.
    assert_eq!(value("0e2147483647"), Ok(0));
}

#[test]
fn ordering_is_exact() {
    let q = |s| Quantity::parse(s).unwrap();
    assert!(q("1Gi") > q("1G"));
    assert!(q("1024Mi") == q("1Gi"));
    assert_eq!(q("1000m").cmp(&q("1")), Ordering::Equal);
    assert!(q("0.5") < q("501m"));
    assert!(q("-1") < q("0"));
    assert!(q("-2") < q("-1"));
    assert!(q("1e-9") > q("0"));
    assert!(q("100000000000000000000001") > q("1e23"));
    assert!(q("1.5Ki") == q("1536"));
}

#[test]
fn whole_numbers() {
    let q = |s| Quantity::parse(s).unwrap();
    assert!(q("2").is_integer());
    assert!(q("2000m").is_integer());
    assert!(!q("1500m").is_integer());
    assert!(q("0.5Ki").is_integer());
    assert!(!q("0.1Ki").is_integer());
    assert!(q("1e3").is_integer());
    assert!(!q("1e-3").is_integer());
    assert!(q("0").is_integer());
}

#[test]
fn legacy_helpers() {
    assert_eq!(cpu_millis("500m"), Some(500));
    assert_eq!(cpu_millis("abc"), None);
    assert_eq!(bytes("128Mi"), Some(128 << 20));
    assert_eq!(bytes("100m"), Some(1), "milli-bytes round up");
    assert_eq!(bytes("1e400"), None);
}

#[test]
fn formatting() {
    assert_eq!(format_bytes(32 << 20), "32Mi");
    assert_eq!(format_bytes(1 << 30), "1Gi");
    assert_eq!(format_bytes(1000), "1000");
    assert_eq!(format_bytes((32 << 20) - 32 * 1024), "32.0Mi");
    assert_eq!(format_bytes(4096), "4Ki");
}

/// Arbitrary strings, biased towards the grammar's alphabet, never panic, and every
/// accepted one reads at both scales consistently (value ≤ milli/1000 rounded up).
#[test]
fn property_never_panics_and_scales_agree() {
    let alphabet: &[u8] = b"0123456789.+-eEinumkKMGTPi \tx,Q";
    let mut rng = fastrand::Rng::with_seed(0x9e37);
    let mut accepted = 0;
    for round in 0..20_000 {
        let len = rng.usize(0..if round % 100 == 0 { 400 } else { 14 });
        let text: String = (0..len)
            .map(|_| {
                if rng.u8(..) < 8 {
                    char::from_u32(rng.u32(0..0x11_0000)).unwrap_or('?')
                } else {
                    char::from(alphabet[rng.usize(..alphabet.len())])
                }
            })
            .collect();
        let Ok(q) = Quantity::parse(&text) else {
            continue;
        };
        accepted += 1;
        let _ = q.is_integer();
        let _ = q.cmp(&q.clone());
        if let (Ok(m), Ok(v)) = (q.milli_value(), q.value()) {
            let expect = if m >= 0 {
                m.div_euclid(1000) + i64::from(m.rem_euclid(1000) != 0)
            } else {
                -((-m).div_euclid(1000) + i64::from((-m).rem_euclid(1000) != 0))
            };
            // Rounding twice up equals rounding once up, as on the API server.
            assert_eq!(v, expect, "{text:?}: milli {m}, value {v}");
        }
    }
    assert!(
        accepted > 1000,
        "the generator hits the grammar: {accepted}"
    );
}

/// A long quantity is parsed in linear time (no quadratic big-number work).
#[test]
fn huge_digit_strings_are_cheap() {
    let digits = "1".repeat(5_000_000);
    assert!(value(&digits).is_err());
    let small = format!("0.{}1", "0".repeat(5_000_000));
    assert_eq!(value(&small), Ok(1));
    assert_eq!(value(&format!("{digits}e-4999990")), Ok(1_111_111_112));
}
