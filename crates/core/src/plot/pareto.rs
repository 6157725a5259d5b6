//! The Pareto frontier of a sweep's runs (vLLM's `plot_pareto`): the runs no other run
//! beats on both tokens/s per user and tokens/s per GPU.

/// How much lower a point's y may be than the best seen and still count as level with it
/// (vLLM's epsilon), so that float noise does not drop a point from the frontier.
const EPSILON: f64 = 1e-9;

/// The indices of the points on the Pareto frontier of maximising both x and y, in
/// ascending x. As vLLM computes it: the points sorted by x then y, both descending, and a
/// point kept when its y is at least the best y of the points before it (less
/// [`EPSILON`]). Points with a non-finite coordinate are left out.
pub fn frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (points[a], points[b]);
        pb.0.total_cmp(&pa.0).then(pb.1.total_cmp(&pa.1))
    });
    let mut best = f64::NEG_INFINITY;
    let mut front = Vec::new();
    for i in order {
        let y = points[i].1;
        if y >= best - EPSILON {
            front.push(i);
            best = best.max(y);
        }
    }
    front.reverse();
    front
}
