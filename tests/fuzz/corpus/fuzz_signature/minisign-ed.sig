untrusted comment: signature from minisign secret key
RURiUSdW0ixiHcN4nU6qTks794SM2aEUC8bmqDRLshG2Mjxt1ck7zVNQW3Y9Rsln2+K0EKNW4wFpMcRiztJNDWwbaLQGMQoRuQU=
trusted comment: file:p.json serial:7 signed:2025-01-31T12:00:00Z
VVCKue4TgSrBofSW0/C19+Q4ktzW/ht+igpi7ELZq9Fnt2P2OQ4HdpejQ947F6eS8+nR2E1Vk4Ud9HgD/uJ+BQ==
