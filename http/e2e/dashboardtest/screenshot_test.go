package dashboardtest

import (
	"bytes"
	"cmp"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
)

// maxShotPixels bounds the area of a saved screenshot: a longer page keeps
// its top, 1200 px at the test window's width of 1280 (the phone's 390 px
// wide page fits whole). With shrink's palette every shot stays under
// 60 KB, so docs/ stays small; the queue page, the one longer page, is cut
// below its partitions, at its first recent messages.
const maxShotPixels = 1280 * 1200

// screenshot writes the page (its top maxShotPixels) to
// docs/screenshots/name.png when UPDATE_SCREENSHOTS=1; CI runs leave the
// tree alone.
func (b *bundle) screenshot(t *testing.T, name string) {
	t.Helper()
	b.save(t, name, chromedp.FullScreenshot(100))
}

// viewportShot is screenshot of what the window shows: a dialog dims only
// the window, so a whole-page shot would show it half dimmed.
func (b *bundle) viewportShot(t *testing.T, name string) {
	t.Helper()
	b.save(t, name, chromedp.CaptureScreenshot())
}

// save writes the browser's shot, made small by shrink.
func (b *bundle) save(t *testing.T, name string, shot chromedp.Action[[]byte]) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	raw, err := chromedp.Run(b.tab, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	small, err := shrink(raw, maxShotPixels)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "..", "..", "docs", "screenshots", name+".png")
	if err := os.WriteFile(path, small, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d KB, %d KB as the browser gave it)", path, len(small)/1024, len(raw)/1024)
}

// shrink makes a browser's PNG (opaque) what docs/screenshots holds: its
// top maxPixels, its colours cut to a palette of 256 without dithering, at
// PNG's best compression. A dashboard page has one or two thousand colours,
// most of them the anti-aliased edges of text, so the palette changes
// nothing a reader sees and the file is about a third the size; dithering
// would only add noise to flat areas, which compresses worse. The standard
// library and palette below suffice for so few colours, where a
// quantisation library would add a module to go.mod for one test helper.
func shrink(shot []byte, maxPixels int) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return nil, err
	}
	r := img.Bounds()
	r.Max.Y = min(r.Max.Y, r.Min.Y+maxPixels/r.Dx())
	rgba := image.NewRGBA(r)
	draw.Draw(rgba, r, img, r.Min, draw.Src)
	pal, index := palette(rgba, 256)
	out := image.NewPaletted(r, pal)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			out.SetColorIndex(x, y, index[rgba.RGBAAt(x, y)])
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// shade is one colour of an image and how many of its pixels have it.
type shade struct {
	c color.RGBA
	n int
}

// palette computes at most size colours for img, and each of img's colours'
// index among them, by median cut: all colours start in one box; the box
// with the most pixels times the widest range of one channel is cut at the
// pixel-weighted median of that channel, until there are size boxes or
// each holds one colour. A box's palette colour is the pixel-weighted mean
// of its colours, so an image of at most size colours keeps them exactly.
func palette(img *image.RGBA, size int) (color.Palette, map[color.RGBA]uint8) {
	count := map[color.RGBA]int{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			count[img.RGBAAt(x, y)]++
		}
	}
	all := make([]shade, 0, len(count))
	for c, n := range count {
		all = append(all, shade{c, n})
	}
	boxes := [][]shade{all}
	for len(boxes) < size {
		cut, ch, score := -1, 0, 0
		for i, box := range boxes {
			c, width := widest(box)
			if s := width * pixels(box); s > score {
				cut, ch, score = i, c, s
			}
		}
		if cut < 0 {
			break
		}
		box := boxes[cut]
		slices.SortFunc(box, func(a, b shade) int { return cmp.Compare(channel(a.c, ch), channel(b.c, ch)) })
		half, at, seen := pixels(box)/2, 1, box[0].n
		for ; at < len(box)-1 && seen < half; at++ {
			seen += box[at].n
		}
		boxes[cut] = box[:at]
		boxes = append(boxes, box[at:])
	}
	pal := make(color.Palette, len(boxes))
	index := make(map[color.RGBA]uint8, len(count))
	for i, box := range boxes {
		var sum [3]int
		for _, s := range box {
			for c := range sum {
				sum[c] += int(channel(s.c, c)) * s.n
			}
			index[s.c] = uint8(i)
		}
		n := pixels(box)
		pal[i] = color.RGBA{uint8((sum[0] + n/2) / n), uint8((sum[1] + n/2) / n), uint8((sum[2] + n/2) / n), 255}
	}
	return pal, index
}

// channel is c's red (0), green (1) or blue (2).
func channel(c color.RGBA, ch int) uint8 { return [3]uint8{c.R, c.G, c.B}[ch] }

// widest is the channel whose values spread widest in box, and how wide.
func widest(box []shade) (ch, width int) {
	for c := range 3 {
		lo, hi := uint8(255), uint8(0)
		for _, s := range box {
			lo, hi = min(lo, channel(s.c, c)), max(hi, channel(s.c, c))
		}
		if int(hi)-int(lo) > width {
			ch, width = c, int(hi)-int(lo)
		}
	}
	return ch, width
}

func pixels(box []shade) int {
	n := 0
	for _, s := range box {
		n += s.n
	}
	return n
}

// shrink keeps an image of at most 256 colours exactly, brings one of more
// to 256 close to the original, and keeps the top maxPixels of a long one
// (the browser tests call it only with UPDATE_SCREENSHOTS=1).
func TestShrink_QuantisesAndCuts(t *testing.T) {
	t.Parallel()
	shrunk := func(img image.Image, maxPixels int) *image.Paletted {
		t.Helper()
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		b, err := shrink(buf.Bytes(), maxPixels)
		if err != nil {
			t.Fatal(err)
		}
		out, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := out.(*image.Paletted)
		if !ok {
			t.Fatalf("shrink wrote a %T, want a paletted image", out)
		}
		return p
	}
	// few has 200 colours; many has 64 × 64 = 4096, a green and blue
	// gradient in steps of 4, and comes back within 3 steps in each
	// channel.
	few := image.NewRGBA(image.Rect(0, 0, 40, 50))
	for i := range 40 * 50 {
		few.SetRGBA(i%40, i/40, color.RGBA{uint8(i % 200), uint8(i % 200 * 7), 90, 255})
	}
	if got := shrunk(few, 40*50); len(got.Palette) != 200 || !samePixels(t, got, few, 0) {
		t.Fatalf("an image of 200 colours comes back with %d", len(got.Palette))
	}
	many := image.NewRGBA(image.Rect(0, 0, 128, 150))
	for y := range 150 {
		for x := range 128 {
			many.SetRGBA(x, y, color.RGBA{30, uint8(x / 2 * 4), uint8(y % 64 * 4), 255})
		}
	}
	got := shrunk(many, 128*128)
	if b := got.Bounds(); b.Dx() != 128 || b.Dy() != 128 {
		t.Fatalf("a 128 × 150 shot cut to 128 × 128 pixels comes back %d × %d", b.Dx(), b.Dy())
	}
	if len(got.Palette) != 256 || !samePixels(t, got, many, 12) {
		t.Fatalf("an image of 4096 colours comes back with %d", len(got.Palette))
	}
}

// samePixels reports whether every pixel of got is within tolerance of
// want's in each channel, naming the first that is not.
func samePixels(t *testing.T, got *image.Paletted, want *image.RGBA, tolerance int) bool {
	t.Helper()
	r := got.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			g, w := color.RGBAModel.Convert(got.At(x, y)).(color.RGBA), want.RGBAAt(x, y)
			for c := range 3 {
				if d := int(channel(g, c)) - int(channel(w, c)); d > tolerance || -d > tolerance {
					t.Errorf("pixel (%d, %d) is %v, want %v", x, y, g, w)
					return false
				}
			}
		}
	}
	return true
}
