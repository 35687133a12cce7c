untrusted comment: signature from appliance secret key
RUQJl2dLp8iyTOJAt26MTLVdqu9M/iLPHAHqfK6GcyDcn+xQISm7PqF309Eg6y2rbBBVusjxFcDUcZA3u1snryaiVNyqXKn18w8=
trusted comment: file:policy.json serial:3 signed:2026-11-30T05:19:50Z
urhdVE1ZJhdHjBojsJl51NcV46Z7sW7Dr2DDxVfaOYKTh1cx/IaPgtVxs62qBJ6LH7y4sy4sS+god/MaE4CiBQ==
