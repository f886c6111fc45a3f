//! What the simulator's results become outside its core (engine, overhead model, records,
//! sweeps): SVG charts, and the named experiments that write CSV, charts and a Markdown summary
//! reproducing the papers' figures.

pub(crate) mod experiments;
pub(crate) mod plot;
