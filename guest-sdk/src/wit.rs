//! Bindings generated from `wit/`, in a module of their own so the interface modules that
//! wrap them do not reach up into the crate root.

wit_bindgen::generate!({
    path: "../wit",
    // `plugin` and the `admission-hook` export: one component shape for every plugin.
    world: "admitting-plugin",
    pub_export_macro: true,
    export_macro_name: "export",
    // The wasi:http imports (and the wasi:io and wasi:clocks types they use) are generated
    // here too, for `http`.
    generate_all,
});

/// The event and outcome types `events.next` passes, under the names the glue uses.
pub use self::informant::plugin::types::{Event, Failure};

/// The `admission-hook` export's trait and records, under the names the glue uses.
pub use self::exports::informant::plugin::admission_hook::Guest as AdmissionGuest;
pub use self::informant::plugin::admission::{Request as AdmitRequest, Response as AdmitResponse};
