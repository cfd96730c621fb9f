# ---- plots/alpha.gp: the power-law exponent alpha of every block matrix by block ----
# (the weights analyzer's WeightWatcher fit, docs/metrics.md "weights"). One panel per matrix kind,
# one line per run; the shaded band is WeightWatcher's well-trained range alpha_low .. alpha_high
# (below: "over-trained", above: "under-trained"). The data file holds one block per run: the
# block, then alpha of wq, wk, wv, wo, w1, w2, w3 ("?" where absent or not fitted); panel k draws
# column kind_col[k]. n_rows and n_cols lay out the n_kinds panels; with several runs the key is
# in the first. With n_facets > 1 (plots/series.h) a row of the n_kinds panels per facet (variant),
# each drawing the runs with run_facet[i] == f on shared axes, and the row's key in a last column.
faceted = n_facets > 1
set multiplot layout n_rows, n_cols title "power-law exponent alpha of the weight spectra (shaded: WeightWatcher's 2 to 6)" font ",11"
band = 'set object 1 rectangle from graph 0, first alpha_low to graph 1, first alpha_high behind fc rgb "#e6f2e6" fs solid noborder'
x_step = n_blocks <= 12 ? 1 : nice_step(n_blocks - 1, 6)
do for [f = 1:n_facets] {
    @band
    set border 3
    set xtics x_step
    set ytics
    set xlabel "block" offset 0, 0.5
    set ylabel "alpha"
    do for [k = 1:n_kinds] {
        set title (faceted ? facet_title[f] . ": " . kind_title[k] : kind_title[k]) font ",9" offset 0, -0.4
        if (!faceted && k == 1 && n_runs > 1) { set key top left font ",7" } else { unset key }
        # about three tic intervals over the runs' values (of every facet: the panels share them)
        set autoscale xy
        stats datafile index 0:(n_runs - 1) using (column(kind_col[k])) nooutput
        if (STATS_max > STATS_min) { set ytics nice_step(STATS_max - STATS_min, 3) } else { set ytics autofreq }
        if (faceted) {
            set xrange [0 : n_blocks > 1 ? n_blocks - 1 : 1]
            set yrange [STATS_min - 0.25 : STATS_max + 0.25]
        }
        plot for [i = 1:n_runs] datafile index (i - 1) using 1:(run_facet[i] == f ? column(kind_col[k]) : NaN) \
             with linespoints lt run_color[i] title (faceted ? "" : run_key[i])
    }
    if (faceted) {
        # the facet's key: a plot of nothing in the row's last column
        unset object 1
        unset border
        unset xtics
        unset ytics
        unset xlabel
        unset ylabel
        set title facet_title[f] font ",9" offset 0, -0.4
        set xrange [0 : 1]
        set yrange [0 : 1]
        set key left center vertical Left reverse font ",7"
        plot for [i = 1:n_runs] NaN with linespoints lt run_color[i] title (run_facet[i] == f ? run_key[i] : "")
    }
}
unset multiplot
