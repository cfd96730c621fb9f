# ---- plots/depth.gp: final loss against depth at fixed width and lr (SpanNorm paper Fig. 11) ----
# The data file holds one block per group of runs (variant, init, lr): layers, final loss; then,
# with has_diverged, a block of the diverged runs: layers, their last finite training loss, the
# colour of their group, their name (a quoted string).
set title "final loss against depth" font ",11"
set logscale x 2
set xlabel "layers"
set ylabel y_label
set key top right
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08
if (has_diverged) {
    plot for [g = 1:n_groups] datafile index (g - 1) using 1:2 with linespoints lt group_color[g] pt 7 ps 1.0 \
             title group_title[g], \
         datafile index n_groups using 1:2:3 with points pt 2 ps 2.2 lw 2 lc variable \
             title "diverged (its last finite training loss)", \
         datafile index n_groups using 1:2:4:3 with labels offset 0, 1.3 font ",8" tc variable
} else {
    plot for [g = 1:n_groups] datafile index (g - 1) using 1:2 with linespoints lt group_color[g] pt 7 ps 1.0 \
             title group_title[g]
}
