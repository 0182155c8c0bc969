package ops

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard is static files (dash/): its script polls /cluster every
// second and draws from /history at load, so it needs no server-side
// templates and no reload, and works offline (nothing from a CDN).
//
//go:embed dash
var dashFiles embed.FS

func dashHandler() http.Handler {
	sub, err := fs.Sub(dashFiles, "dash")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/", "/dash.js", "/dash.css":
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
