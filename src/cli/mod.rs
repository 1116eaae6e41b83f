//! What the CLI prints, as pure functions of API objects (unit-tested without a daemon).

pub mod age;
pub mod describe;
pub mod events;
pub mod images;
pub mod logs_query;
pub mod table;
