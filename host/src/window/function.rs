//! The Wasm side of a window: an aggregate function (the accumulator is
//! the function's), or a window process function (the "accumulator" is the
//! window's elements, kept by the host; see [`super::elements`]).

use crate::runtime::bindings::weir::function::types::{Accumulate, ValueCells, WindowEvents};
use crate::runtime::packing::{BareEvents, FiredWindows, Grouping};
use crate::runtime::{AggregateFunctionInstance, CallError, WindowProcessFunctionInstance};
use crate::Event;

use super::elements;
use super::operator::WindowError;

/// The function computing a window's result.
pub enum WindowFunction {
    /// Folds events into an accumulator.
    Aggregate(Box<AggregateFunctionInstance>),
    /// Sees all of a window's events when it fires.
    Process(WindowProcessFunctionInstance),
}

impl WindowFunction {
    /// Fold each entry's events into its accumulator.
    pub fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, WindowError> {
        match self {
            WindowFunction::Aggregate(function) => Ok(function.add(batch)?),
            WindowFunction::Process(_) => Ok(batch
                .iter()
                .map(|entry| {
                    let mut stored = entry.accumulator.clone().unwrap_or_default();
                    elements::encode_into(&mut stored, &entry.events);
                    stored
                })
                .collect()),
        }
    }

    /// Whether it takes packed batches ([`Self::add_grouped`]): a Wasm
    /// aggregate function.
    pub fn takes_packed(&self) -> bool {
        matches!(self, WindowFunction::Aggregate(function) if function.is_wasm())
    }

    /// [`Self::add`] for packed events grouped by window (see
    /// [`AggregateFunctionInstance::add_grouped`]); only when
    /// [`Self::takes_packed`].
    pub fn add_grouped(
        &mut self,
        accumulators: &ValueCells,
        events: &BareEvents,
        grouping: Grouping<'_>,
    ) -> Result<Vec<Vec<u8>>, WindowError> {
        match self {
            WindowFunction::Aggregate(function) => {
                Ok(function.add_grouped(accumulators, events, grouping)?)
            }
            WindowFunction::Process(_) => Err(WindowError::Unsupported(
                "a window process function keeps events, not packed batches".into(),
            )),
        }
    }

    /// Combine two accumulators (merging sessions).
    pub fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, CallError> {
        match self {
            WindowFunction::Aggregate(function) => function.merge(a, b),
            WindowFunction::Process(_) => Ok([a, b].concat()),
        }
    }

    /// The outputs of finished windows.
    pub fn results(&mut self, batch: &FiredWindows) -> Result<Vec<Event>, WindowError> {
        match self {
            WindowFunction::Aggregate(function) => Ok(function.results(batch)?),
            WindowFunction::Process(function) => {
                let windows = batch
                    .iter()
                    .map(|(key, window, elements)| {
                        Ok(WindowEvents {
                            key: key.to_vec(),
                            window,
                            events: elements::decode(elements)?,
                        })
                    })
                    .collect::<Result<Vec<_>, WindowError>>()?;
                Ok(function.process_windows(&windows)?)
            }
        }
    }
}
