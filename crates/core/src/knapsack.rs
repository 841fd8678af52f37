//! Exact multiple-choice knapsack (MCKP) for cutoff selection (seed 000 §4.1).
//!
//! Choose exactly one item per class to minimise Σ cost subject to
//! Σ weight ≤ budget. Here a class is an app, an item a candidate cutoff,
//! weight its preload bytes P_i(s) and cost w_i · T_i(s).
//!
//! Method: per class, drop dominated items (heavier and not cheaper); if the
//! budget is not binding, take every class's cheapest item. Otherwise a
//! depth-first branch-and-bound whose bound is the LP relaxation (greedy over
//! the lower convex hulls of the remaining classes, sorted once by
//! efficiency), started from the rounded LP solution as incumbent. The result
//! is exact: property tests compare it with brute force.

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
struct Reduced {
    w: Vec<u64>,
    c: Vec<f64>,
    idx: Vec<usize>,
}

fn reduce(items: &[Item]) -> Reduced {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        items[a]
            .weight
            .cmp(&items[b].weight)
            .then(items[a].cost.total_cmp(&items[b].cost))
            .then(a.cmp(&b))
    });
    let mut r = Reduced {
        w: Vec::new(),
        c: Vec::new(),
        idx: Vec::new(),
    };
    for i in order {
        let it = items[i];
        if r.c.last().is_none_or(|&last| it.cost < last) {
            if r.w.last() == Some(&it.weight) {
                // Same weight, cheaper (cannot happen after the sort, kept for safety).
                let n = r.w.len() - 1;
                r.c[n] = it.cost;
                r.idx[n] = i;
            } else {
                r.w.push(it.weight);
                r.c.push(it.cost);
                r.idx.push(i);
            }
        }
    }
    r
}

/// A hull segment: moving class `class` from hull point `from` to `to`
/// saves `dc` cost for `dw` weight.
#[derive(Clone, Copy)]
struct Seg {
    class: usize,
    /// Position of the segment along its class's hull (0 = first step).
    step: usize,
    dw: u64,
    dc: f64,
}

/// Lower convex hull of a reduced class (indices into the reduced items).
fn hull(r: &Reduced) -> Vec<usize> {
    let mut h: Vec<usize> = Vec::with_capacity(r.w.len());
    for i in 0..r.w.len() {
        while h.len() >= 2 {
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            // Efficiency a->b must exceed efficiency b->i, else b is not on the hull.
            let e_ab = (r.c[a] - r.c[b]) / (r.w[b] - r.w[a]) as f64;
            let e_bi = (r.c[b] - r.c[i]) / (r.w[i] - r.w[b]) as f64;
            if e_ab <= e_bi {
                h.pop();
            } else {
                break;
            }
        }
        h.push(i);
    }
    h
}

struct Search<'a> {
    classes: &'a [Reduced],
    segs: &'a [Seg],
    /// Σ over depth ≥ d of the lightest cost / weight (by depth position).
    suffix_c0: Vec<f64>,
    suffix_w0: Vec<u64>,
    budget: u64,
    best_cost: f64,
    best: Vec<usize>,
    cur: Vec<usize>,
    nodes: u64,
    eps: f64,
}

impl Search<'_> {
    /// LP lower bound on the cost of classes at depth ≥ d with `left` budget.
    fn bound(&self, d: usize, left: u64) -> f64 {
        let base_w = self.suffix_w0[d];
        if base_w > left {
            return f64::INFINITY;
        }
        let mut room = (left - base_w) as f64;
        let mut cost = self.suffix_c0[d];
        for s in self.segs {
            // Classes are stored by depth: a segment of a fixed class is skipped.
            if s.class < d {
                continue;
            }
            if room <= 0.0 {
                break;
            }
            if (s.dw as f64) <= room {
                room -= s.dw as f64;
                cost -= s.dc;
            } else {
                cost -= s.dc * room / s.dw as f64;
                room = 0.0;
            }
        }
        cost
    }

    fn dfs(&mut self, d: usize, used_w: u64, used_c: f64) {
        self.nodes += 1;
        if d == self.classes.len() {
            if used_c < self.best_cost - self.eps {
                self.best_cost = used_c;
                self.best.clone_from(&self.cur);
            }
            return;
        }
        let left = self.budget - used_w;
        if used_c + self.bound(d, left) >= self.best_cost - self.eps {
            return;
        }
        let cls = &self.classes[d];
        let rest_w0 = self.suffix_w0[d + 1];
        // Try the heaviest affordable (cheapest) items first: good incumbents early.
        for j in (0..cls.w.len()).rev() {
            if cls.w[j] + rest_w0 > left {
                continue;
            }
            self.cur[d] = j;
            self.dfs(d + 1, used_w + cls.w[j], used_c + cls.c[j]);
        }
    }
}

/// Solves the MCKP exactly. `classes[k]` lists class k's items.
pub fn solve(classes: &[Vec<Item>], budget: u64) -> Result<Solution, KnapsackError> {
    for (k, items) in classes.iter().enumerate() {
        if items.is_empty() {
            return Err(KnapsackError::EmptyClass(k));
        }
        if let Some(i) = items.iter().position(|it| !it.cost.is_finite()) {
            return Err(KnapsackError::BadCost { class: k, item: i });
        }
    }
    let reduced: Vec<Reduced> = classes.iter().map(|c| reduce(c)).collect();
    let need: u64 = reduced.iter().map(|r| r.w[0]).sum();
    if need > budget {
        return Err(KnapsackError::Infeasible { need, budget });
    }
    let heaviest: u64 = reduced.iter().map(|r| *r.w.last().unwrap()).sum();
    if heaviest <= budget {
        let choice: Vec<usize> = reduced.iter().map(|r| *r.idx.last().unwrap()).collect();
        let total_cost = reduced.iter().map(|r| *r.c.last().unwrap()).sum();
        return Ok(Solution {
            choice,
            total_weight: heaviest,
            total_cost,
            budget_slack: true,
            nodes: 0,
        });
    }

    // Order classes by the cost spread they can buy (largest first), so the
    // decisions that matter are made near the root.
    let mut order: Vec<usize> = (0..reduced.len()).collect();
    order.sort_by(|&a, &b| {
        let sa = reduced[a].c[0] - reduced[a].c.last().unwrap();
        let sb = reduced[b].c[0] - reduced[b].c.last().unwrap();
        sb.total_cmp(&sa).then(a.cmp(&b))
    });
    let mut by_depth: Vec<Reduced> = Vec::with_capacity(order.len());
    let mut slots: Vec<Option<Reduced>> = reduced.into_iter().map(Some).collect();
    for &k in &order {
        by_depth.push(slots[k].take().unwrap());
    }
    let n = by_depth.len();
    let mut segs: Vec<Seg> = Vec::new();
    for (d, r) in by_depth.iter().enumerate() {
        let h = hull(r);
        for (step, w) in h.windows(2).enumerate() {
            segs.push(Seg {
                class: d,
                step,
                dw: r.w[w[1]] - r.w[w[0]],
                dc: r.c[w[0]] - r.c[w[1]],
            });
        }
    }
    segs.sort_by(|a, b| (b.dc / b.dw as f64).total_cmp(&(a.dc / a.dw as f64)));
    let mut suffix_c0 = vec![0.0; n + 1];
    let mut suffix_w0 = vec![0u64; n + 1];
    for d in (0..n).rev() {
        suffix_c0[d] = suffix_c0[d + 1] + by_depth[d].c[0];
        suffix_w0[d] = suffix_w0[d + 1] + by_depth[d].w[0];
    }

    // Incumbent: the LP greedy without its fractional step, then improved
    // greedily class by class with what budget is left.
    let mut inc: Vec<usize> = vec![0; n];
    let hull_pos: Vec<Vec<usize>> = by_depth.iter().map(hull).collect();
    let mut at: Vec<usize> = vec![0; n];
    let mut left = budget - suffix_w0[0];
    for s in &segs {
        // Steps of a class are taken in hull order; a skipped step blocks the later ones.
        if s.step == at[s.class] && s.dw <= left {
            left -= s.dw;
            at[s.class] += 1;
        }
    }
    for d in 0..n {
        inc[d] = hull_pos[d][at[d]];
    }
    let mut used: u64 = (0..n).map(|d| by_depth[d].w[inc[d]]).sum();
    for d in 0..n {
        let r = &by_depth[d];
        for j in (inc[d] + 1..r.w.len()).rev() {
            if used - r.w[inc[d]] + r.w[j] <= budget {
                used = used - r.w[inc[d]] + r.w[j];
                inc[d] = j;
                break;
            }
        }
    }
    let inc_cost: f64 = (0..n).map(|d| by_depth[d].c[inc[d]]).sum();
    let scale = suffix_c0[0].abs().max(1.0);
    let mut search = Search {
        classes: &by_depth,
        segs: &segs,
        suffix_c0,
        suffix_w0,
        budget,
        best_cost: inc_cost,
        best: inc.clone(),
        cur: vec![0; n],
        nodes: 0,
        eps: 1e-12 * scale,
    };
    search.dfs(0, 0, 0.0);
    let mut choice = vec![0usize; n];
    let mut total_weight = 0u64;
    let mut total_cost = 0.0;
    for (d, &k) in order.iter().enumerate() {
        let j = search.best[d];
        choice[k] = by_depth[d].idx[j];
        total_weight += by_depth[d].w[j];
        total_cost += by_depth[d].c[j];
    }
    Ok(Solution {
        choice,
        total_weight,
        total_cost,
        budget_slack: false,
        nodes: search.nodes,
    })
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
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
