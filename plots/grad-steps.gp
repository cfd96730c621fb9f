# ---- plots/grad-steps.gp: the FFN weight gradient norm of every layer over training ----
# (SpanNorm paper Fig. 3, 7, 14). One panel per run; one line per layer, coloured by depth.
# The data file holds one block per run: the step, then the FFN gradient norm of blocks 0 .. L-1
# (ffn_layers[i] columns). n_rows and n_cols lay out the panels.
set multiplot layout n_rows, n_cols title "FFN weight gradient norm over training" font ",11"
set logscale y
set format y logfmt
set xlabel "step"
set ylabel "FFN gradient norm"
set cblabel "layer"
unset key
do for [i = 1:n_runs] {
    n = ffn_layers[i]
    set cbrange [0 : (n > 1 ? n - 1 : 1)]
    cb_step = n > 5 ? nice_step(n - 1, 4) : 1
    set cbtics cb_step
    # few x tics: the panels are narrow
    stats datafile index (i - 1) using 1 nooutput
    if (STATS_max > STATS_min) { set xtics nice_step(STATS_max - STATS_min, 3) } else { set xtics autofreq }
    set title run_title[i] font ",9"
    plot for [l = 0:n - 1] datafile index (i - 1) using 1:(column(l + 2)):(l) with lines lw 1.2 lc palette
}
unset multiplot
