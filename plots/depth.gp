# ---- plots/depth.gp: final loss against depth at fixed width and lr (SpanNorm paper Fig. 11) ----
# The data file holds one block per group of runs (variant, init, lr): layers, final loss; then,
# with has_diverged, a block of the diverged runs: layers, their last finite training loss, the
# colour of their group, their name (a quoted string).
# Each group's line joins its mean loss at each depth (gnuplot's `smooth unique` averages the runs,
# seeds, of one depth); every run is a small open circle, so the spread over seeds shows. The key
# sits right of the plot, where it covers no point however many groups it names.
set title "final loss against depth" font ",11"
set logscale x 2
set xlabel "layers"
set ylabel y_label
set key outside right top vertical Left reverse
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08
runs_and_means = 'plot for [g = 1:n_groups] datafile index (g - 1) using 1:2 with points lt group_color[g] pt 6 ps 0.8, \
    for [g = 1:n_groups] datafile index (g - 1) using 1:2 smooth unique with linespoints lt group_color[g] ps 1.0 title group_title[g]'
if (has_diverged) {
    @runs_and_means, \
         datafile index n_groups using 1:2:3 with points pt 2 ps 2.2 lw 2 lc variable \
             title "diverged (its last finite training loss)", \
         datafile index n_groups using 1:2:4:3 with labels offset 0, 1.3 font ",8" tc variable
} else {
    @runs_and_means
}
