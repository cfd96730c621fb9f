# cos-heatmap: cosine similarity between every pair of layer outputs (Fig. 5)
# drawn by spanprobe 0.1.0 from cos-heatmap.dat; redraw in this directory with
#   gnuplot cos-heatmap.gp                    (PNG; or -e 'fmt="pdf"', -e 'fmt="svg"')

# ---- this figure's data and labels ----
width = 800
height = 500
out_base = "cos-heatmap"
datafile = "cos-heatmap.dat"
heat_title = "cosine similarity between layer outputs (mean over tokens)"
heat_label = "cosine similarity"
cb_min = -1
cb_max = 1
array heat_side[1] = [31]
n_rows = 1
n_cols = 1
n_runs = 1
array run_title[1] = ["smollm2.h5"]
array run_short[1] = ["smollm2.h5"]
array run_color[1] = [1]

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
    set title run_title[i] font ",9"
    plot datafile index (i - 1) matrix with image
}
unset multiplot
