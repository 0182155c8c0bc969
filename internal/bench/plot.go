package bench

// WritePlots writes the report's PNG plots into dir and returns their paths.
func WritePlots(dir string, rep *Report) ([]string, error) { return nil, nil }
