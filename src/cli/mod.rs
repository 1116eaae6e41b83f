//! The command line: its arguments (`args`), each command's body (`commands`), and
//! what the commands print, as pure functions of API objects (unit-tested without a
//! daemon).

pub mod age;
pub mod args;
pub mod commands;
pub mod custom_columns;
pub mod describe;
pub mod error_text;
pub mod events;
pub mod images;
pub mod jsonpath;
pub mod logs_query;
pub mod pod_containers;
pub mod pod_output;
pub mod pod_ref;
pub mod port_forward_spec;
pub mod reference;
pub mod selector;
pub mod table;
pub mod top;
