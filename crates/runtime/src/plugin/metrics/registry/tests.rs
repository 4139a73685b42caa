use super::*;

fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn metrics(tenant: &Arc<TenantMetrics>, plugin: &str, max_series: usize) -> PluginMetrics {
    PluginMetrics::new(
        plugin.into(),
        MetricLimits {
            max_series,
            ..MetricLimits::default()
        },
        tenant.clone(),
    )
}

fn tenant(name: &str, max_series: usize, max_bytes: usize) -> Arc<TenantMetrics> {
    Arc::new(TenantMetrics::new(
        name,
        MetricLimits {
            max_series,
            max_bytes,
        },
    ))
}

#[test]
fn series_are_written_in_any_label_order_and_deleted() {
    let m = PluginMetrics::default();
    let ab = l(&[("a", "1"), ("b", "2")]);
    let ba = l(&[("b", "2"), ("a", "1")]);
    m.write("hits_total", "Hits.", ab.clone(), None, Op::Add(1.0))
        .unwrap();
    m.write("hits", "ignored", ba.clone(), None, Op::Add(2.0))
        .unwrap();
    m.write(
        "lat",
        "Latency.",
        vec![],
        None,
        Op::Observe(&[1.0, 2.0], 1.5),
    )
    .unwrap();
    let snap = m.snapshot();
    assert_eq!(snap[0].name, "hits");
    assert_eq!(snap[0].help, "Hits.");
    assert_eq!(snap[0].samples[0].value, SeriesValue::Counter(3.0));
    assert_eq!(
        snap[1].samples[0].value,
        SeriesValue::Histogram {
            counts: [0, 1, 0].into(),
            sum: 1.5
        }
    );
    assert_eq!(m.series(), 2);
    // hits: its name and help, then `hits` + `a1b2` on one line; lat: its name and help,
    // then `lat` on 2 buckets + 3 lines.
    assert_eq!(m.bytes(), (4 + 5) + (4 + 4) + (3 + 8) + 3 * 5);
    assert!(m.delete("hits_total", ba));
    assert!(!m.delete("hits", ab));
    assert_eq!(m.series(), 1);
    assert_eq!(m.bytes(), (3 + 8) + 3 * 5);
    assert_eq!(m.snapshot().len(), 1, "an empty family goes");
    assert!(m.delete("lat", vec![]));
    assert_eq!((m.series(), m.bytes()), (0, 0));
    assert_eq!(m.tenant_metrics().held(), (0, 0));
}

#[test]
fn the_ceiling_refuses_new_series_only_and_counts() {
    let m = metrics(&TenantMetrics::unlimited(), "p", 3);
    for i in 0..3 {
        let labels = l(&[("i", &i.to_string())]);
        m.write("g", "", labels, None, Op::Set(1.0)).unwrap();
    }
    let e = m
        .write("g", "", l(&[("i", "3")]), None, Op::Set(1.0))
        .unwrap_err();
    assert!(
        matches!(
            e,
            MetricError::OverBudget {
                over: Over::PluginSeries { limit: 3 },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("holds 3 series"), "{e}");
    // Existing series still take writes at the ceiling.
    m.write("g", "", l(&[("i", "0")]), None, Op::Set(5.0))
        .unwrap();
    assert_eq!(m.refused(Refusal::Limit), 1);
    assert_eq!(m.series(), 3);
}

#[test]
fn a_plugins_bytes_are_capped_as_well_as_its_series() {
    let m = PluginMetrics::new(
        "p".into(),
        MetricLimits {
            max_series: 1000,
            max_bytes: 4096,
        },
        TenantMetrics::unlimited(),
    );
    let big = "v".repeat(1000);
    let mut made = 0;
    let e = loop {
        match m.write(
            "g",
            "",
            l(&[("k", &format!("{made}{big}"))]),
            None,
            Op::Set(1.0),
        ) {
            Ok(()) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(made, 4, "four series of ~1 KiB fit in 4 KiB");
    assert!(m.bytes() <= 4096);
    assert_eq!(e.refusal(), Refusal::Bytes, "{e}");
    assert!(e.to_string().contains("limits.max-metric-kib"), "{e}");
    // A histogram costs each of its lines.
    let h = PluginMetrics::new(
        "p".into(),
        MetricLimits {
            max_series: 1000,
            max_bytes: 35 * 1001,
        },
        TenantMetrics::unlimited(),
    );
    let bounds: Vec<f64> = (1..=32).map(f64::from).collect();
    let labels = l(&[("k", &"v".repeat(1000))]);
    let e = h
        .write("h", "", labels, None, Op::Observe(&bounds, 1.0))
        .unwrap_err();
    assert_eq!(e.refusal(), Refusal::Bytes, "35 lines of 1002 bytes: {e}");
}

#[test]
fn a_tenants_budget_binds_all_its_plugins_and_no_other_tenant() {
    let a = tenant("a", 5, usize::MAX);
    let b = tenant("b", 5, usize::MAX);
    let (a1, a2, b1) = (
        metrics(&a, "a1", 100),
        metrics(&a, "a2", 100),
        metrics(&b, "b1", 100),
    );
    for i in 0..3 {
        a1.write("x", "", l(&[("i", &i.to_string())]), None, Op::Set(1.0))
            .unwrap();
    }
    for i in 0..2 {
        a2.write("x", "", l(&[("i", &i.to_string())]), None, Op::Set(1.0))
            .unwrap();
    }
    let e = a2
        .write("x", "", l(&[("i", "9")]), None, Op::Set(1.0))
        .unwrap_err();
    assert_eq!(e.refusal(), Refusal::TenantLimit, "{e}");
    assert!(
        e.to_string().contains("tenant `a`'s plugins hold 5 series"),
        "{e}"
    );
    assert_eq!(a2.series(), 2, "a refusal changes nothing");
    assert_eq!(a.held().0, 5);
    // Updates still go through at the budget.
    a2.write("x", "", l(&[("i", "0")]), None, Op::Set(7.0))
        .unwrap();
    // Another tenant's plugin is untouched by a's budget.
    for i in 0..5 {
        b1.write("x", "", l(&[("i", &i.to_string())]), None, Op::Set(1.0))
            .unwrap();
    }
    // A plugin leaving gives its share back.
    drop(a1);
    assert_eq!(a.held().0, 2);
    a2.write("x", "", l(&[("i", "9")]), None, Op::Set(1.0))
        .unwrap();
    // Bytes too.
    let t = tenant("t", usize::MAX, 100);
    let (t1, t2) = (metrics(&t, "t1", 100), metrics(&t, "t2", 100));
    t1.write("g", "", l(&[("k", &"v".repeat(60))]), None, Op::Set(1.0))
        .unwrap();
    let e = t2
        .write("g", "", l(&[("k", &"v".repeat(60))]), None, Op::Set(1.0))
        .unwrap_err();
    assert_eq!(e.refusal(), Refusal::TenantBytes, "{e}");
    assert_eq!(t2.refused(Refusal::TenantBytes), 1);
}

#[test]
fn a_name_has_one_type_in_a_tenant_and_each_tenant_its_own() {
    let t = tenant("t", usize::MAX, usize::MAX);
    let a = metrics(&t, "a", 10);
    let b = metrics(&t, "b", 10);
    a.write("x", "", vec![], None, Op::Add(1.0)).unwrap();
    let e = a.write("x", "", vec![], None, Op::Set(1.0)).unwrap_err();
    assert!(matches!(e, MetricError::TypeConflict { .. }), "{e}");
    let e = b.write("x", "", vec![], None, Op::Set(1.0)).unwrap_err();
    assert!(
        e.to_string().contains("another plugin of this tenant"),
        "{e}"
    );
    // The same type: b's own series, apart from a's.
    b.write("x", "", vec![], None, Op::Add(5.0)).unwrap();
    assert_eq!(a.snapshot()[0].samples[0].value, SeriesValue::Counter(1.0));
    assert!(b.delete("x", vec![]));
    assert_eq!(a.series(), 1, "b's delete leaves a's series alone");
    // Another tenant's plugin takes the name as another type, with other help.
    let other = metrics(&tenant("u", usize::MAX, usize::MAX), "c", 10);
    other
        .write("x", "Other help.", vec![], None, Op::Set(3.0))
        .unwrap();
    assert_eq!(a.snapshot()[0].kind, Kind::Counter);
    // Once nobody in the tenant uses it, the name is free for another type.
    drop(a);
    b.write("x", "", vec![], None, Op::Set(1.0)).unwrap();
    let e = b
        .write("h", "", vec![], None, Op::Observe(&[1.0], 1.0))
        .and_then(|_| b.write("h", "", vec![], None, Op::Observe(&[2.0], 1.0)))
        .unwrap_err();
    assert!(e.to_string().contains("buckets"), "{e}");
    assert_eq!(b.refused(Refusal::Type), 2);
}

#[test]
fn groups_expire_together() {
    let m = PluginMetrics::default();
    let g = || Some("deploy/web".to_string());
    m.write("a", "", l(&[("k", "1")]), g(), Op::Set(1.0))
        .unwrap();
    m.write("a", "", l(&[("k", "2")]), None, Op::Set(1.0))
        .unwrap();
    m.write("b", "", vec![], g(), Op::Add(1.0)).unwrap();
    assert_eq!(m.delete_group("deploy/web"), 2);
    assert_eq!(m.series(), 1);
    assert_eq!(m.bytes(), 1 + (1 + 2));
    assert_eq!(m.tenant_metrics().held(), (1, m.bytes()));
    assert_eq!(m.snapshot().len(), 1);
    assert_eq!(m.delete_group("deploy/web"), 0);
}

#[test]
fn bad_values_change_nothing() {
    let m = PluginMetrics::default();
    for op in [
        Op::Add(-1.0),
        Op::Add(f64::NAN),
        Op::Add(f64::INFINITY),
        Op::Set(f64::INFINITY),
        Op::Observe(&[], f64::NAN),
    ] {
        let e = m.write("v", "", vec![], None, op).unwrap_err();
        assert!(matches!(e, MetricError::InvalidValue { .. }), "{e}");
    }
    assert_eq!(m.series(), 0);
    assert_eq!(m.refused(Refusal::Value), 5);
}

#[test]
fn sums_stay_finite() {
    let m = PluginMetrics::default();
    m.write("c", "", vec![], None, Op::Add(f64::MAX)).unwrap();
    let e = m
        .write("c", "", vec![], None, Op::Add(f64::MAX))
        .unwrap_err();
    assert_eq!(e.refusal(), Refusal::Overflow, "{e}");
    assert!(e.to_string().contains("largest finite number"), "{e}");
    m.write("h", "", vec![], None, Op::Observe(&[], f64::MAX))
        .unwrap();
    let e = m
        .write("h", "", vec![], None, Op::Observe(&[], f64::MAX))
        .unwrap_err();
    assert_eq!(e.refusal(), Refusal::Overflow, "{e}");
    // Small additions to a counter at the largest number are absorbed, never infinite.
    m.write("c", "", vec![], None, Op::Add(1.0)).unwrap();
    for f in m.snapshot() {
        match &f.samples[0].value {
            SeriesValue::Counter(v) => assert_eq!(*v, f64::MAX),
            SeriesValue::Histogram { counts, sum } => {
                assert_eq!(*sum, f64::MAX);
                assert_eq!(
                    counts.iter().sum::<u64>(),
                    1,
                    "the refused observation is not counted"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(m.refused(Refusal::Overflow), 2);
}
