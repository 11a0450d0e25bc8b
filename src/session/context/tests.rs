use super::*;
use crate::routing::DecisionKind as K;

#[test]
fn every_decision_kind_and_operation_maps_to_the_same_metric_label() {
    let kinds = [
        K::TransactionPin,
        K::Translation,
        K::DynamicRule,
        K::Cache,
        K::PatternRule,
        K::RegexRule,
        K::ReadWriteSplit,
        K::Default,
        K::Reject,
        K::Hint,
    ];
    assert_eq!(kinds.len(), metrics::Decision::COUNT);
    for k in kinds {
        assert_eq!(decision_label(k).as_str(), k.as_str());
    }
    for op in [
        Operation::Read,
        Operation::Write,
        Operation::Ddl,
        Operation::TransactionControl(crate::sql::analyze::TxControl::Begin),
        Operation::Session,
        Operation::Admin,
        Operation::Unknown,
    ] {
        assert_eq!(operation_label(op).as_str(), op.name());
    }
}
