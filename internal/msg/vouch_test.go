package msg

import "testing"

// TestVouchedOnly: what a broker of version 18 is told of an ack or a final
// prefix with an unvouched top holds it at the clean or vouched part, with
// no silence inside the part left out.
func TestVouchedOnly(t *testing.T) {
	a := Ack{Pubend: "P", T: 100, Released: 90, Delivered: 95, Unvouched: 20}
	if got, want := a.CleanOnly(), (Ack{Pubend: "P", T: 80, Released: 80, Delivered: 80}); got != want {
		t.Fatalf("CleanOnly = %+v, want %+v", got, want)
	}
	if got := (Ack{Pubend: "P", T: 100, Released: 50, Delivered: 60}).CleanOnly(); got.T != 100 || got.Released != 50 || got.Delivered != 60 {
		t.Fatalf("CleanOnly of a clean ack changed it: %+v", got)
	}
	k := Knowledge{Pubend: "P", Final: 100, Start: 90, End: 120, Unvouched: 30}
	got := k.VouchedOnly()
	if got.Final != 70 || got.Unvouched != 0 || got.Start != 101 || got.End != 120 {
		t.Fatalf("VouchedOnly = %+v, want final 70 and silence only above the old final (101..120)", got)
	}
	inside := Knowledge{Pubend: "P", Final: 100, Start: 90, End: 100, Unvouched: 30}.VouchedOnly()
	if inside.Final != 70 || inside.Start <= inside.End {
		t.Fatalf("VouchedOnly of silence wholly inside the final prefix = %+v, want the final prefix alone", inside)
	}
	if k.Vouched() != 70 || (Knowledge{Final: 5, Unvouched: 9}).Vouched() != 0 {
		t.Fatal("Vouched is not Final minus Unvouched, floored at 0")
	}
}
