untrusted comment: signature from minisign secret key
RWRiUSdW0ixiHTBswweL81DeGJY/BEaDqCATWksWx2EP8ZD/7AlpJuuxBqgVOkvKxztg/BDJ775qOlefn7bV9x2ErM+UhPbR9gA=
trusted comment: file:p.json serial:7 signed:2025-01-31T12:00:00Z
xrIeRdL1h8zuj8CSgM+tmgp7R7wgaJXsEWvIfHFt8Vg1dbQrgdB5+tovW8sY5QsBplQ3nL5eDxrOwPAxJZnFCA==
