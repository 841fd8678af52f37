//! Exact multiple-choice knapsack (MCKP) for cutoff selection (the AppFlow paper §4.1).
//!
//! Choose exactly one item per class to minimise Σ cost subject to
//! Σ weight ≤ budget. Here a class is an app, an item a candidate cutoff,
//! weight its preload bytes P_i(s) and cost w_i · T_i(s).
//!
//! Method (see [`solve`]): dominance reduction, the LP relaxation over the
//! classes' lower convex hulls, reduced-cost fixing against the rounded LP
//! solution, and a Pareto-frontier DP over the few classes left free. The
//! result is exact: property tests compare it with brute force.

use thiserror::Error;

/// One choice within a class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Item {
    /// Budget it consumes.
    pub weight: u64,
    /// Cost it incurs (to minimise).
    pub cost: f64,
}

/// The optimum.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Chosen item index per class (indices into the caller's items).
    pub choice: Vec<usize>,
    /// Σ weight of the chosen items.
    pub total_weight: u64,
    /// Σ cost of the chosen items.
    pub total_cost: f64,
    /// True when the budget did not bind (each class took its cheapest item).
    pub budget_slack: bool,
    /// Branch-and-bound nodes visited (0 on the slack path).
    pub nodes: u64,
}

/// Why no solution exists.
#[derive(Debug, Error, PartialEq)]
pub enum KnapsackError {
    /// A class has no item.
    #[error("class {0} has no item")]
    EmptyClass(usize),
    /// A cost is NaN or infinite.
    #[error("class {class} item {item}: cost is not finite")]
    BadCost {
        /// Class index.
        class: usize,
        /// Item index.
        item: usize,
    },
    /// Even the lightest items exceed the budget.
    #[error("infeasible: the lightest choices need {need} but the budget is {budget}")]
    Infeasible {
        /// Σ of the lightest weights.
        need: u64,
        /// The budget.
        budget: u64,
    },
}

/// A class reduced to its efficient items: weights strictly increasing,
/// costs strictly decreasing. `idx` maps back to the caller's items.
/// Views into one arena ([`Arena`]) so that a solve allocates per array,
/// not per class.
struct Reduced<'a> {
    w: &'a [u64],
    c: &'a [f64],
    idx: &'a [u32],
}

/// Flat storage of every class's reduced items.
struct Arena {
    w: Vec<u64>,
    c: Vec<f64>,
    idx: Vec<u32>,
    off: Vec<usize>,
}

impl Arena {
    fn build(classes: &[Vec<Item>]) -> Arena {
        let total: usize = classes.iter().map(Vec::len).sum();
        let mut a = Arena {
            w: Vec::with_capacity(total),
            c: Vec::with_capacity(total),
            idx: Vec::with_capacity(total),
            off: Vec::with_capacity(classes.len() + 1),
        };
        let mut order: Vec<u32> = Vec::new();
        a.off.push(0);
        for items in classes {
            order.clear();
            order.extend(0..items.len() as u32);
            // Cutoff options come in weight order already: sort only if not.
            if !items.windows(2).all(|p| p[0].weight <= p[1].weight) {
                order.sort_by(|&x, &y| {
                    let (ix, iy) = (&items[x as usize], &items[y as usize]);
                    ix.weight.cmp(&iy.weight).then(x.cmp(&y))
                });
            }
            let start = a.w.len();
            for &i in &order {
                let it = items[i as usize];
                let n = a.w.len();
                if n > start && a.w[n - 1] == it.weight {
                    // Equal weight: keep the cheaper, if it still beats the lighter item.
                    if it.cost < a.c[n - 1] && (n - 1 == start || it.cost < a.c[n - 2]) {
                        a.c[n - 1] = it.cost;
                        a.idx[n - 1] = i;
                    }
                } else if n == start || it.cost < a.c[n - 1] {
                    // Keep an item only if strictly cheaper than every lighter one.
                    a.w.push(it.weight);
                    a.c.push(it.cost);
                    a.idx.push(i);
                }
            }
            a.off.push(a.w.len());
        }
        a
    }

    fn class(&self, k: usize) -> Reduced<'_> {
        let (s, e) = (self.off[k], self.off[k + 1]);
        Reduced {
            w: &self.w[s..e],
            c: &self.c[s..e],
            idx: &self.idx[s..e],
        }
    }
}

/// Appends the lower convex hull of `r` (indices into its items) to `out`.
fn hull_into(r: &Reduced, out: &mut Vec<u32>) {
    let base = out.len();
    for i in 0..r.w.len() {
        while out.len() - base >= 2 {
            let (a, b) = (out[out.len() - 2] as usize, out[out.len() - 1] as usize);
            // Efficiency a->b must exceed efficiency b->i, else b is not on the hull.
            let e_ab = (r.c[a] - r.c[b]) / (r.w[b] - r.w[a]) as f64;
            let e_bi = (r.c[b] - r.c[i]) / (r.w[i] - r.w[b]) as f64;
            if e_ab <= e_bi {
                out.pop();
            } else {
                break;
            }
        }
        out.push(i as u32);
    }
}

/// Flat lists of u32, one per class.
struct Lists {
    v: Vec<u32>,
    off: Vec<usize>,
}

impl Lists {
    fn get(&self, k: usize) -> &[u32] {
        &self.v[self.off[k]..self.off[k + 1]]
    }
}

/// Efficiency of hull step `k` of class `r` with hull `h` (cost saved per byte).
fn step_eff(r: &Reduced, h: &[u32], k: usize) -> f64 {
    let (a, b) = (h[k] as usize, h[k + 1] as usize);
    (r.c[a] - r.c[b]) / (r.w[b] - r.w[a]) as f64
}

/// A heap entry: the next hull step of a class, ordered by efficiency.
#[derive(PartialEq)]
struct Next {
    eff: f64,
    class: usize,
}

impl Eq for Next {}

impl PartialOrd for Next {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Next {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.eff
            .total_cmp(&other.eff)
            .then(other.class.cmp(&self.class))
    }
}

/// A partial solution over the free classes processed so far.
#[derive(Clone, Copy)]
struct State {
    w: u64,
    c: f64,
    /// Index of the parent state in the previous layer.
    parent: u32,
    /// Reduced item chosen in this layer's class.
    item: u32,
}

/// Solves the MCKP exactly. `classes[k]` lists class k's items.
///
/// 1. Each class keeps its efficient items (dominance), and its lower hull.
/// 2. The LP relaxation is solved greedily by hull-step efficiency (a heap
///    over classes); its break efficiency λ gives the Lagrangian bound
///    cost(x) ≥ Σ_i min_j (c_ij + λ w_ij) − λ·budget for every feasible x.
/// 3. The LP solution rounded down and filled greedily is the incumbent.
/// 4. Reduced-cost fixing: an item whose reduced cost c + λw − min exceeds
///    incumbent − bound is in no better solution; classes left with one item
///    are fixed.
/// 5. The remaining free classes are solved by a Pareto-frontier DP over
///    (weight, cost), pruned by dominance, the budget and the same bound.
pub fn solve(classes: &[Vec<Item>], budget: u64) -> Result<Solution, KnapsackError> {
    for (k, items) in classes.iter().enumerate() {
        if items.is_empty() {
            return Err(KnapsackError::EmptyClass(k));
        }
        if let Some(i) = items.iter().position(|it| !it.cost.is_finite()) {
            return Err(KnapsackError::BadCost { class: k, item: i });
        }
    }
    let arena = Arena::build(classes);
    let red: Vec<Reduced> = (0..classes.len()).map(|k| arena.class(k)).collect();
    let n = red.len();
    let need: u64 = red.iter().map(|r| r.w[0]).sum();
    if need > budget {
        return Err(KnapsackError::Infeasible { need, budget });
    }
    let heaviest: u64 = red.iter().map(|r| *r.w.last().unwrap()).sum();
    if heaviest <= budget {
        let choice: Vec<usize> = red
            .iter()
            .map(|r| *r.idx.last().unwrap() as usize)
            .collect();
        let total_cost = red.iter().map(|r| *r.c.last().unwrap()).sum();
        return Ok(Solution {
            choice,
            total_weight: heaviest,
            total_cost,
            budget_slack: true,
            nodes: 0,
        });
    }

    // 2. LP relaxation by hull steps in decreasing efficiency.
    let hulls = {
        let mut l = Lists {
            v: Vec::with_capacity(arena.w.len()),
            off: Vec::with_capacity(n + 1),
        };
        l.off.push(0);
        for r in &red {
            hull_into(r, &mut l.v);
            l.off.push(l.v.len());
        }
        l
    };
    let mut at = vec![0usize; n]; // hull position reached per class
    let mut heap = std::collections::BinaryHeap::with_capacity(n);
    for (k, r) in red.iter().enumerate() {
        let h = hulls.get(k);
        if h.len() > 1 {
            heap.push(Next {
                eff: step_eff(r, h, 0),
                class: k,
            });
        }
    }
    let mut left = budget - need;
    let mut lambda = 0.0;
    let mut taken: Vec<(f64, usize)> = Vec::new(); // (efficiency, class) of steps taken, in order
    let mut break_class = None;
    while let Some(Next { eff, class: k }) = heap.pop() {
        let (h, r) = (hulls.get(k), &red[k]);
        let dw = r.w[h[at[k] + 1] as usize] - r.w[h[at[k]] as usize];
        if dw > left {
            lambda = eff; // the break step: LP is fractional here
            break_class = Some(k);
            break;
        }
        left -= dw;
        at[k] += 1;
        taken.push((eff, k));
        if at[k] + 1 < h.len() {
            heap.push(Next {
                eff: step_eff(r, h, at[k]),
                class: k,
            });
        }
    }
    let lp_at = at.clone();

    // 3. Incumbent A: the LP rounded down, then the greedy goes on past the
    // break taking every later hull step that still fits.
    let mut at_a = lp_at.clone();
    let mut left_a = left;
    let mut heap_a = heap;
    while let Some(Next { class: k, .. }) = heap_a.pop() {
        let (h, r) = (hulls.get(k), &red[k]);
        let dw = r.w[h[at_a[k] + 1] as usize] - r.w[h[at_a[k]] as usize];
        if dw <= left_a {
            left_a -= dw;
            at_a[k] += 1;
            if at_a[k] + 1 < h.len() {
                heap_a.push(Next {
                    eff: step_eff(r, h, at_a[k]),
                    class: k,
                });
            }
        }
    }
    let vertex = |k: usize, at: &[usize]| hulls.get(k)[at[k]] as usize;
    let cost_of = |at: &[usize]| -> f64 { (0..n).map(|k| red[k].c[vertex(k, at)]).sum() };
    let mut inc_at = at_a;
    // Incumbent B: take the break step, then back out the least efficient
    // steps taken (latest first) until the budget holds.
    if let Some(bk) = break_class {
        let mut at_b = lp_at.clone();
        let h = hulls.get(bk);
        let mut over = red[bk].w[h[at_b[bk] + 1] as usize] - red[bk].w[h[at_b[bk]] as usize] - left;
        at_b[bk] += 1;
        for &(_, k) in taken.iter().rev() {
            if over == 0 {
                break;
            }
            if k == bk || at_b[k] == 0 {
                continue;
            }
            let hk = hulls.get(k);
            let dw = red[k].w[hk[at_b[k]] as usize] - red[k].w[hk[at_b[k] - 1] as usize];
            at_b[k] -= 1;
            over = over.saturating_sub(dw);
        }
        if over == 0 && cost_of(&at_b) < cost_of(&inc_at) {
            inc_at = at_b;
        }
    }
    let mut inc: Vec<usize> = (0..n).map(|k| vertex(k, &inc_at)).collect();
    // Then single-class upgrades to any (non-hull) item that still fits.
    let mut used: u64 = (0..n).map(|k| red[k].w[inc[k]]).sum();
    for k in 0..n {
        let r = &red[k];
        if let Some(j) = (inc[k] + 1..r.w.len())
            .rev()
            .find(|&j| used - r.w[inc[k]] + r.w[j] <= budget)
        {
            used = used - r.w[inc[k]] + r.w[j];
            inc[k] = j;
        }
    }
    let best_cost: f64 = (0..n).map(|k| red[k].c[inc[k]]).sum();
    let eps = 1e-12 * red.iter().map(|r| r.c[0].abs()).sum::<f64>().max(1.0);

    // Lagrangian pieces: m_k = min_j (c + λw) per class; bound = Σ m_k − λ·budget.
    let m: Vec<f64> = red
        .iter()
        .map(|r| {
            r.w.iter()
                .zip(r.c)
                .map(|(&w, &c)| c + lambda * w as f64)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let lb: f64 = m.iter().sum::<f64>() - lambda * budget as f64;
    let gap = best_cost - lb;

    // 4. Reduced-cost fixing.
    let allowed =
        {
            let mut l = Lists {
                v: Vec::with_capacity(arena.w.len()),
                off: Vec::with_capacity(n + 1),
            };
            l.off.push(0);
            for (r, &mk) in red.iter().zip(&m) {
                l.v.extend((0..r.w.len() as u32).filter(|&j| {
                    r.c[j as usize] + lambda * r.w[j as usize] as f64 - mk <= gap + eps
                }));
                l.off.push(l.v.len());
            }
            l
        };
    let mut fixed_w = 0u64;
    let mut fixed_c = 0.0;
    let mut free: Vec<usize> = Vec::new();
    let mut choice_red = vec![0usize; n];
    for k in 0..n {
        match allowed.get(k) {
            [] => {
                // Only the incumbent's own item can be the optimum here.
                choice_red[k] = inc[k];
                fixed_w += red[k].w[inc[k]];
                fixed_c += red[k].c[inc[k]];
            }
            [j] => {
                choice_red[k] = *j as usize;
                fixed_w += red[k].w[*j as usize];
                fixed_c += red[k].c[*j as usize];
            }
            _ => free.push(k),
        }
    }
    if fixed_w > budget {
        // Fixing is only valid if something beats the incumbent; nothing can.
        return Ok(finish(&red, &inc, false, 0));
    }

    // 5. Pareto DP over the free classes, each state bounded by the exact
    // LP of the classes still to come at the state's residual capacity.
    let cap = budget - fixed_w;
    let lp_rest: Vec<LpSuffix> = {
        let mut v = vec![LpSuffix::default(); free.len() + 1];
        for (i, &k) in free.iter().enumerate().rev() {
            v[i] = v[i + 1].with_class(&red[k], allowed.get(k));
        }
        v
    };
    let mut layers: Vec<Vec<State>> = Vec::with_capacity(free.len() + 1);
    layers.push(vec![State {
        w: 0,
        c: 0.0,
        parent: 0,
        item: 0,
    }]);
    let mut nodes = 0u64;
    let mut next: Vec<State> = Vec::new();
    for (i, &k) in free.iter().enumerate() {
        next.clear();
        let prev = layers.last().unwrap();
        let rest = &lp_rest[i + 1];
        for (pi, st) in prev.iter().enumerate() {
            for &j in allowed.get(k) {
                let (w, c) = (st.w + red[k].w[j as usize], st.c + red[k].c[j as usize]);
                if w + rest.base_w > cap {
                    continue;
                }
                if fixed_c + c + rest.bound(cap - w) >= best_cost - eps {
                    continue;
                }
                next.push(State {
                    w,
                    c,
                    parent: pi as u32,
                    item: j,
                });
            }
        }
        nodes += next.len() as u64;
        // Keep the Pareto frontier: by weight ascending, strictly falling cost.
        next.sort_unstable_by(|a, b| a.w.cmp(&b.w).then(a.c.total_cmp(&b.c)));
        let mut front: Vec<State> = Vec::with_capacity(next.len());
        for s in &next {
            if front.last().is_none_or(|l| s.c < l.c - eps) {
                front.push(*s);
            }
        }
        if front.is_empty() {
            // No partial solution can beat the incumbent.
            return Ok(finish(&red, &inc, false, nodes));
        }
        layers.push(front);
    }
    let last = layers.last().unwrap();
    let (bi, bs) = last
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.c.total_cmp(&b.1.c))
        .expect("non-empty frontier");
    if fixed_c + bs.c >= best_cost - eps {
        return Ok(finish(&red, &inc, false, nodes));
    }
    let mut pi = bi;
    for (i, &k) in free.iter().enumerate().rev() {
        let s = layers[i + 1][pi];
        choice_red[k] = s.item as usize;
        pi = s.parent as usize;
    }
    Ok(finish(&red, &choice_red, false, nodes))
}

/// The LP relaxation of a set of classes as a function of capacity:
/// base (lightest items) minus the savings of hull steps taken greedily.
#[derive(Clone)]
struct LpSuffix {
    base_w: u64,
    base_c: f64,
    /// Hull steps, most efficient first: (efficiency, weight, saving).
    steps: Vec<(f64, u64, f64)>,
    /// Prefix sums over `steps`: cumulative weight and saving after k steps.
    cum_w: Vec<u64>,
    cum_c: Vec<f64>,
}

impl Default for LpSuffix {
    fn default() -> Self {
        Self {
            base_w: 0,
            base_c: 0.0,
            steps: Vec::new(),
            cum_w: vec![0],
            cum_c: vec![0.0],
        }
    }
}

impl LpSuffix {
    /// This suffix plus one class restricted to its `allowed` reduced items.
    fn with_class(&self, r: &Reduced, allowed: &[u32]) -> LpSuffix {
        let sw: Vec<u64> = allowed.iter().map(|&j| r.w[j as usize]).collect();
        let sc: Vec<f64> = allowed.iter().map(|&j| r.c[j as usize]).collect();
        let sub = Reduced {
            w: &sw,
            c: &sc,
            idx: &[],
        };
        let mut h = Vec::with_capacity(sw.len());
        hull_into(&sub, &mut h);
        let own: Vec<(f64, u64, f64)> = h
            .windows(2)
            .enumerate()
            .map(|(k, p)| {
                let (a, b) = (p[0] as usize, p[1] as usize);
                (
                    step_eff(&sub, &h, k),
                    sub.w[b] - sub.w[a],
                    sub.c[a] - sub.c[b],
                )
            })
            .collect();
        // Merge two lists sorted by decreasing efficiency.
        let mut steps = Vec::with_capacity(self.steps.len() + own.len());
        let (mut a, mut b) = (0, 0);
        while a < self.steps.len() || b < own.len() {
            if b == own.len() || (a < self.steps.len() && self.steps[a].0 >= own[b].0) {
                steps.push(self.steps[a]);
                a += 1;
            } else {
                steps.push(own[b]);
                b += 1;
            }
        }
        let mut cum_w = Vec::with_capacity(steps.len() + 1);
        let mut cum_c = Vec::with_capacity(steps.len() + 1);
        let (mut tw, mut tc) = (0u64, 0.0);
        cum_w.push(0);
        cum_c.push(0.0);
        for &(_, w, c) in &steps {
            tw += w;
            tc += c;
            cum_w.push(tw);
            cum_c.push(tc);
        }
        LpSuffix {
            base_w: self.base_w + sub.w[0],
            base_c: self.base_c + sub.c[0],
            steps,
            cum_w,
            cum_c,
        }
    }

    /// LP optimum of these classes with `cap` capacity (cap ≥ base_w).
    fn bound(&self, cap: u64) -> f64 {
        let room = cap - self.base_w;
        // Steps fully taken: the largest k with cum_w[k] <= room.
        let k = self.cum_w.partition_point(|&w| w <= room) - 1;
        let mut saving = self.cum_c[k];
        if k < self.steps.len() {
            let (_, w, c) = self.steps[k];
            saving += c * (room - self.cum_w[k]) as f64 / w as f64;
        }
        self.base_c - saving
    }
}

/// Maps a choice over reduced items back to the caller's items.
fn finish(red: &[Reduced], choice_red: &[usize], budget_slack: bool, nodes: u64) -> Solution {
    let mut total_weight = 0;
    let mut total_cost = 0.0;
    let choice = red
        .iter()
        .zip(choice_red)
        .map(|(r, &j)| {
            total_weight += r.w[j];
            total_cost += r.c[j];
            r.idx[j] as usize
        })
        .collect();
    Solution {
        choice,
        total_weight,
        total_cost,
        budget_slack,
        nodes,
    }
}

/// Exhaustive search, for tests and for checking small instances.
#[doc(hidden)]
pub fn brute_force(classes: &[Vec<Item>], budget: u64) -> Option<(Vec<usize>, f64)> {
    fn rec(
        classes: &[Vec<Item>],
        budget: u64,
        k: usize,
        w: u64,
        c: f64,
        cur: &mut Vec<usize>,
        best: &mut Option<(Vec<usize>, f64)>,
    ) {
        if k == classes.len() {
            if best.as_ref().is_none_or(|b| c < b.1) {
                *best = Some((cur.clone(), c));
            }
            return;
        }
        for (j, it) in classes[k].iter().enumerate() {
            if w + it.weight <= budget {
                cur.push(j);
                rec(
                    classes,
                    budget,
                    k + 1,
                    w + it.weight,
                    c + it.cost,
                    cur,
                    best,
                );
                cur.pop();
            }
        }
    }
    let mut best = None;
    rec(classes, budget, 0, 0, 0.0, &mut Vec::new(), &mut best);
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn it(weight: u64, cost: f64) -> Item {
        Item { weight, cost }
    }

    #[test]
    fn picks_the_exact_optimum_where_greedy_fails() {
        // Greedy by efficiency takes class 0's step (eff 1.0) and then
        // cannot afford class 1's; the optimum is the opposite.
        let classes = vec![
            vec![it(0, 10.0), it(6, 4.0)],
            vec![it(0, 10.0), it(10, 0.5)],
        ];
        let s = solve(&classes, 10).unwrap();
        assert_eq!(s.choice, vec![0, 1]);
        assert!((s.total_cost - 10.5).abs() < 1e-12);
        assert!(!s.budget_slack);
    }

    #[test]
    fn slack_budget_takes_cheapest() {
        let classes = vec![vec![it(0, 3.0), it(5, 1.0)], vec![it(1, 2.0), it(2, 2.0)]];
        let s = solve(&classes, 100).unwrap();
        assert!(s.budget_slack);
        assert_eq!(s.choice, vec![1, 0]);
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(solve(&[vec![]], 1), Err(KnapsackError::EmptyClass(0)));
        assert_eq!(
            solve(&[vec![it(5, 1.0)]], 1),
            Err(KnapsackError::Infeasible { need: 5, budget: 1 })
        );
        assert_eq!(
            solve(&[vec![it(0, f64::NAN)]], 1),
            Err(KnapsackError::BadCost { class: 0, item: 0 })
        );
    }

    fn instance() -> impl Strategy<Value = (Vec<Vec<Item>>, u64)> {
        let item = (0u64..60, 0u32..1000).prop_map(|(w, c)| Item {
            weight: w,
            cost: c as f64 / 7.0,
        });
        (
            prop::collection::vec(prop::collection::vec(item, 1..6), 1..6),
            0u64..200,
        )
    }

    fn check(classes: &[Vec<Item>], budget: u64) -> Result<(), TestCaseError> {
        let brute = brute_force(classes, budget);
        match solve(classes, budget) {
            Ok(s) => {
                let (_, best) = brute.expect("solver found a solution brute force did not");
                let w: u64 = s
                    .choice
                    .iter()
                    .enumerate()
                    .map(|(k, &j)| classes[k][j].weight)
                    .sum();
                let c: f64 = s
                    .choice
                    .iter()
                    .enumerate()
                    .map(|(k, &j)| classes[k][j].cost)
                    .sum();
                prop_assert!(w <= budget);
                prop_assert_eq!(w, s.total_weight);
                prop_assert!((c - best).abs() < 1e-9, "solver {} brute {}", c, best);
            }
            Err(KnapsackError::Infeasible { .. }) => prop_assert!(brute.is_none()),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
        Ok(())
    }

    /// Large weights and budgets (as byte counts are).
    fn large_instance() -> impl Strategy<Value = (Vec<Vec<Item>>, u64)> {
        let item = (0u64..400_000, 0u32..1000).prop_map(|(w, c)| Item {
            weight: w,
            cost: c as f64 / 7.0,
        });
        (
            prop::collection::vec(prop::collection::vec(item, 1..6), 1..6),
            512u64..1_200_000,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn equals_brute_force_with_large_weights((classes, budget) in large_instance()) {
            check(&classes, budget)?;
        }

        #[test]
        fn equals_brute_force_and_respects_budget((classes, budget) in instance()) {
            let brute = brute_force(&classes, budget);
            match solve(&classes, budget) {
                Ok(s) => {
                    let (_, best) = brute.expect("solver found a solution brute force did not");
                    prop_assert!(s.total_weight <= budget);
                    let w: u64 = s.choice.iter().enumerate().map(|(k, &j)| classes[k][j].weight).sum();
                    let c: f64 = s.choice.iter().enumerate().map(|(k, &j)| classes[k][j].cost).sum();
                    prop_assert_eq!(w, s.total_weight);
                    prop_assert!((c - s.total_cost).abs() < 1e-9);
                    prop_assert!((c - best).abs() < 1e-9, "solver {} brute {}", c, best);
                }
                Err(KnapsackError::Infeasible { .. }) => prop_assert!(brute.is_none()),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}
