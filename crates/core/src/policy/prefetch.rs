//! Paralfetch / iorap-like prefetching (the AppFlow paper §6.1 baseline): at launch,
//! the whole launch profile is streamed in first-access order with large
//! reads; nothing is kept resident before the launch.

use super::*;

/// `prefetch` (= `paralfetch`).
pub const POLICY: Policy = Policy {
    name: "prefetch",
    aliases: &["paralfetch"],
    summary: "whole launch profile streamed at launch (Paralfetch/iorap-like, the AppFlow paper §6.1)",
    preload: PreloadStrategy::WholeProfile,
    reclaim: ReclaimStrategy::Kernel,
    killer: KillerStrategy::Kernel,
    switch: SwitchStrategy::Demand,
    kernel: KernelVariant::Stock,
};
