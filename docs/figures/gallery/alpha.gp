# alpha: power-law exponent alpha of every block matrix's spectrum by block (WeightWatcher's fit)
# drawn by spanprobe 0.1.0 from alpha.dat; redraw in this directory with
#   gnuplot alpha.gp                    (PNG; or -e 'fmt="pdf"', -e 'fmt="svg"')

# ---- this figure's data and labels ----
width = 800
height = 500
out_base = "alpha"
datafile = "alpha.dat"
n_kinds = 6
array kind_title[6] = ["W_Q", "W_K", "W_V", "W_O", "W_1", "W_2"]
array kind_col[6] = [2, 3, 4, 5, 6, 7]
n_blocks = 8
alpha_low = 2
alpha_high = 6
n_rows = 2
n_cols = 3
n_runs = 3
array run_title[3] = ["pre, L=8, scaled init, lr 0.001", "post, L=8, scaled init, lr 0.001", "span, L=8, scaled init, lr 0.001"]
array run_short[3] = ["pre", "post", "span"]
array run_color[3] = [1, 2, 3]

# ---- plots/common.gp: the terminal and the styles every spanprobe figure shares ----
# Set before this: width, height (pixels), out_base (the image name without extension); fmt (png,
# pdf or svg) and out_file may be given on the command line: gnuplot -e 'fmt="pdf"' <figure>.gp
if (!exists("fmt")) fmt = "png"
if (!exists("out_file")) out_file = out_base . "." . fmt
# (nested: this gnuplot has no "else if")
if (fmt eq "png") {
    set terminal pngcairo size width, height noenhanced font "Sans,9"
} else {
    if (fmt eq "pdf") {
        # the PNG's proportions at 72 points per inch, so text and lines keep their relative size
        set terminal pdfcairo size (width / 72.0), (height / 72.0) noenhanced font "Sans,9"
    } else {
        if (fmt eq "svg") {
            set terminal svg size width, height noenhanced font "Sans,9" background rgb "white"
        } else {
            print sprintf("unknown fmt '%s' (expected png, pdf or svg)", fmt)
            exit status 2
        }
    }
}
set output out_file
set datafile missing "?"
set grid lc rgb "#e4e4e4"
set border lc rgb "#505050"
set key noautotitle spacing 1.0 samplen 2.5 font ",8" opaque
set tics nomirror out scale 0.6
set border 3
# one colour per run (its position among the inputs), the same in every figure of one plot call
set linetype 1 lc rgb "#1f77b4" lw 1.6 pt 7 ps 0.5
set linetype 2 lc rgb "#d62728" lw 1.6 pt 5 ps 0.5
set linetype 3 lc rgb "#2ca02c" lw 1.6 pt 9 ps 0.6
set linetype 4 lc rgb "#ff7f0e" lw 1.6 pt 11 ps 0.6
set linetype 5 lc rgb "#9467bd" lw 1.6 pt 13 ps 0.6
set linetype 6 lc rgb "#8c564b" lw 1.6 pt 7 ps 0.5
set linetype 7 lc rgb "#e377c2" lw 1.6 pt 5 ps 0.5
set linetype 8 lc rgb "#17becf" lw 1.6 pt 9 ps 0.6
set linetype 9 lc rgb "#7f7f7f" lw 1.6 pt 11 ps 0.6
set linetype 10 lc rgb "#bcbd22" lw 1.6 pt 13 ps 0.6
set linetype 11 lc rgb "#393b79" lw 1.6 pt 7 ps 0.5
set linetype 12 lc rgb "#ad494a" lw 1.6 pt 5 ps 0.5
set linetype cycle 12
# the colour scale of depth (per-layer curves) and of heatmaps: viridis
viridis = 'set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")'
@viridis
# log axes are labelled in powers of ten
logfmt = "1e%L"
# a round tic step (1, 2 or 5 times a power of ten) cutting range (> 0) into about n intervals
nice_step(range, n) = (ns_s = range * 1.0 / n, ns_p = 10 ** floor(log10(ns_s)), ns_m = ns_s / ns_p, \
                       (ns_m < 1.5 ? 1 : ns_m < 3.5 ? 2 : ns_m < 7.5 ? 5 : 10) * ns_p)

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
