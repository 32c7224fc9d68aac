[inputs: ["{mix,.formatter}.exs", "{config,lib,test,bench,mix}/**/*.{ex,exs}"], line_length: 110]
