# ---- plots/heatmap.gp: one (L+1) x (L+1) matrix of layer pairs per run, side by side ----
# The data file holds one block per run: row i of the matrix is layer i, column j layer j.
# heat_title, heat_label (the colour bar), cb_min, cb_max and heat_side[] (each matrix's side)
# are set before this.
set multiplot layout n_rows, n_cols title heat_title font ",11"
set cbrange [cb_min : cb_max]
if (cb_min < 0) {
    set palette defined (-1 "#2166ac", -0.5 "#92c5de", 0 "#f7f7f7", 0.5 "#f4a582", 1 "#b2182b")
}
set cblabel heat_label
unset key
set xlabel "layer j"
set ylabel "layer i"
set size ratio -1
set tics out
set grid noxtics noytics
do for [i = 1:n_runs] {
    n = heat_side[i] - 1
    set xrange [-0.5 : n + 0.5]
    set yrange [-0.5 : n + 0.5]
    tic_step = n > 10 ? ceil(n / 8.0) : 1  # about 8 labelled layers however deep
    set xtics 0, tic_step
    set ytics 0, tic_step
    set title run_title[i] font ",9"
    plot datafile index (i - 1) matrix with image
}
unset multiplot
