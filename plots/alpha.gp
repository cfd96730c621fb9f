# ---- plots/alpha.gp: the power-law exponent alpha of every block matrix by block ----
# (the weights analyzer's WeightWatcher fit, docs/metrics.md "weights"). One panel per matrix kind,
# one line per run; the shaded band is WeightWatcher's well-trained range alpha_low .. alpha_high
# (below: "over-trained", above: "under-trained"). The data file holds one block per run: the
# block, then alpha of wq, wk, wv, wo, w1, w2, w3 ("?" where absent or not fitted); panel k draws
# column kind_col[k]. n_rows and n_cols lay out the n_kinds panels; with several runs the key is
# in the first.
set multiplot layout n_rows, n_cols title "power-law exponent alpha of the weight spectra (shaded: WeightWatcher's 2 to 6)" font ",11"
set object 1 rectangle from graph 0, first alpha_low to graph 1, first alpha_high behind fc rgb "#e6f2e6" fs solid noborder
set xlabel "block" offset 0, 0.5
set ylabel "alpha"
x_step = n_blocks <= 12 ? 1 : nice_step(n_blocks - 1, 6)
set xtics x_step
do for [k = 1:n_kinds] {
    set title kind_title[k] font ",9" offset 0, -0.4
    if (k == 1 && n_runs > 1) { set key top left font ",7" } else { unset key }
    # about three tic intervals over the runs' values: the panels are short
    stats datafile index 0:(n_runs - 1) using (column(kind_col[k])) nooutput
    if (STATS_max > STATS_min) { set ytics nice_step(STATS_max - STATS_min, 3) } else { set ytics autofreq }
    plot for [i = 1:n_runs] datafile index (i - 1) using 1:(column(kind_col[k])) with linespoints \
         lt run_color[i] title run_title[i]
}
unset multiplot
